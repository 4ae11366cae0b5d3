"""The collapse study (diagnostics.md, "The collapse study").

Files, in the order data flows through them:
    grid.py     the (temperature, top_p) grid, the study settings, one generation's data
    study.py    running the study: generations sampled once, re-evaluated over the grid
    report.py   the report: grid cells and paired rows (cli.md, "The collapse report")
    render.py   Rich tables and figures
"""
