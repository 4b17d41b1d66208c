#!/bin/sh
# Fake opensm that exits at once and writes no dump file.
echo "not opensm"
exit 3
