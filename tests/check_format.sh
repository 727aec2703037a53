#!/bin/sh
# Every C source follows the repo's .clang-format (clang-format --dry-run reports any change).
# One clang-format process for all files: a process per file took a minute on a loaded machine.
cd "$1" || exit 1
files=$(git ls-files 'src/*.[ch]' 'tests/unit/*.[ch]' 'tests/fuzz/*.[ch]' 'bench/*.[ch]' 2>/dev/null)
[ -n "$files" ] || files=$(find src tests/unit tests/fuzz bench -name '*.[ch]')
# shellcheck disable=SC2086
bad=$(clang-format --dry-run --Werror $files 2>&1 | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error:.*/\1/p' | sort -u)
for f in $bad; do echo "not formatted: $f"; done
total=$(echo "$files" | wc -w)
nbad=$(echo "$bad" | grep -c . || true)
echo "$((total - nbad)) passed, $nbad failed"
[ "$nbad" -eq 0 ]
