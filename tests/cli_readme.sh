#!/usr/bin/env bash
# The README's first command as a new user runs it: its package step works as root on a
# machine without sudo (and through sudo otherwise), and updates the package lists before it
# installs. apt-get, id and sudo are stand-ins that record what they were asked.
set -uo pipefail
TRM=$1 SRC=$2 GOLDEN=$3 TMP=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$TMP" && mkdir -p "$TMP/bin" && cd "$TMP" || exit 1

# the first ```sh block after "## Two commands", up to the build
awk '/^## Two commands/ {on = 1} on && /^```sh/ {inb = 1; next} inb && /^```/ {exit} inb' "$SRC/README.md" > block.sh
grep -q "apt-get install" block.sh || fail "no apt-get install in the README's first command"
setup=$(awk '/^cmake / {exit} {print}' block.sh | sed '$ s/ *&& *\\$//')
[ -n "$setup" ] || fail "no setup step before cmake in the README's first command"
printf '%s\n' "$setup" > setup.sh

cat > bin/apt-get <<'SH'
#!/bin/sh
echo "apt-get $*" >> "$LOG"
SH
cat > bin/id <<'SH'
#!/bin/sh
[ "$1" = "-u" ] && echo "$FAKE_UID"
SH
chmod +x bin/apt-get bin/id
for shell in /bin/sh /bin/bash; do
  [ -x "$shell" ] || continue
  # as root on a fresh machine: no sudo anywhere on PATH
  : > root.log
  LOG=$PWD/root.log FAKE_UID=0 PATH=$PWD/bin "$shell" setup.sh > out.txt 2>&1 || { cat out.txt; fail "$shell: the setup step fails as root without sudo"; }
  [ "$(sed -n 1p root.log)" = "apt-get update" ] || fail "$shell: apt-get update does not come first: $(cat root.log)"
  sed -n 2p root.log | grep -q "^apt-get install -y cmake gcc make" || fail "$shell: no install after the update: $(cat root.log)"
  # as a user: through sudo
  printf '#!/bin/sh\necho "sudo $*" >> "$LOG"\n' > bin/sudo
  chmod +x bin/sudo
  : > user.log
  LOG=$PWD/user.log FAKE_UID=1000 PATH=$PWD/bin "$shell" setup.sh > out.txt 2>&1 || { cat out.txt; fail "$shell: the setup step fails as a user"; }
  [ "$(sed -n 1p user.log)" = "sudo apt-get update" ] || fail "$shell: a user's update does not go through sudo: $(cat user.log)"
  sed -n 2p user.log | grep -q "^sudo apt-get install -y" || fail "$shell: a user's install does not go through sudo"
  rm bin/sudo
done
echo "cli_readme: ok"
