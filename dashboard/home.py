import streamlit as st

st.title("Private & fair release workbench")
