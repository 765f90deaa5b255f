"""Report writers: text table, JSON, JUnit XML, and an SVG/HTML picture of the fabric."""
