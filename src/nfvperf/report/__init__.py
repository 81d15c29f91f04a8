"""Reports: the seed reports' tables on the terminal, and a self-contained HTML page with plots.

``build(run)`` turns a stored run into tables (report.tables), ``print_report`` renders them with
rich, ``write_html`` writes the HTML report; ``compare`` diffs two runs.
"""
