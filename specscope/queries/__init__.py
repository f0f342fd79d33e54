"""Fleet queries: the store's acceptance questions as SQL for the engines fleets run.

Input: a store (its manifest says which files and how many rows of each are committed).
Output: views and queries as text for DuckDB, ClickHouse and Spark (``engines``), and
specscope's own answer to each query from the same store (``fleet``), which the engines'
answers must equal to the last digit. Imports: the kernel and ``store``; never a reader
of logs or servers, nor the analysis, report or CLI above.
"""
