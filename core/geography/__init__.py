"""Geography shared by the census and districts areas: hierarchies, blocks, adjacency, synthetic grids."""
