# bench/common.sh — what the side-by-side scripts share (sourced, not run): one number of a JSON
# line and the median of a column of numbers.

# field KEY [FILE]: the first number at "KEY" in FILE (or stdin); nothing where there is none
field() { sed -n "s/.*\"$1\": \([0-9.e+-]*\).*/\1/p" "${2:--}" | head -1; }

# median: of the numbers on stdin, one a line (the middle two averaged for an even count); blank
# lines (a run that gave no figure) are left out rather than counted as 0; "-" where none is left
median() {
  sort -g | awk '$1 != "" { v[++n] = $1 } END { print !n ? "-" : (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }'
}
