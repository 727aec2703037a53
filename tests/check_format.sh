#!/bin/sh
# Every C source follows the repo's .clang-format (clang-format --dry-run reports any change).
cd "$1" || exit 1
files=$(git ls-files 'src/*.[ch]' 'tests/unit/*.[ch]' 'tests/fuzz/*.[ch]' 'bench/*.[ch]' 2>/dev/null)
[ -n "$files" ] || files=$(find src tests/unit tests/fuzz bench -name '*.[ch]')
bad=0
for f in $files; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || { echo "not formatted: $f"; bad=$((bad + 1)); }
done
total=$(echo "$files" | wc -w)
echo "$((total - bad)) passed, $bad failed"
[ "$bad" -eq 0 ]
