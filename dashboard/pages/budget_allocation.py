import streamlit as st

st.title("Under construction")
st.info("This tool is not available yet.")
