"""The collapse study (diagnostics.md, "The collapse study").

Files, in the order data flows through them:
    defaults.py   the default grid and conditions (what the command line's help shows)
    grid.py       the (temperature, top_p) grid, the study settings, one generation's data
    order.py      the order of operations on one step (mask first vs truncation first)
    study.py      running the study: generations sampled once, re-evaluated over the grid
    studyfile.py  the study file (TOML): schemas x prompts, grid, seeds, conditions
    runner.py     a whole study into a report folder, resumably (data.jsonl)
    report.py     the report: grid cells and paired rows (cli.md, "The collapse report")
    breakdown.py  collapse by grammar position, the order of operations per schema
    diversity.py  whole-output diversity over seeds, and the free control
    render.py     Rich tables and the --plot figures
    figures.py    the study report's figures
    markdown.py   the study report folder: report.md, report.json, figures
"""
