"""The library of the commands in tools/ (convert.py, reference.py, make_random.py, plot.py,
gen_unicode_tables.py): it only reads and writes files."""
