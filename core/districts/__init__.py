"""District geography, districting plans and what privacy noise does to districts (Cohen et al. 2021, §6-7)."""
