#!/usr/bin/env bash
# The build's capability check of the mps kernels (cmake/spirv_embed.c) must refuse a module
# that uses fp64, float atomics, subgroup operations or a capability outside its allowed list,
# or that is truncated, and accept one that uses none.
# usage: spirv_check.sh SPIRV_EMBED GLSLC TMPDIR
set -uo pipefail
EMBED=$1 GLSLC=$2 TMP=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$TMP" && mkdir -p "$TMP" && cd "$TMP" || exit 1
shader() { # name, extensions, body
  printf '#version 460\n%s\nlayout(local_size_x = 64) in;\nlayout(std430, binding = 0) buffer b_ { float v[]; };\nvoid main() { %s }\n' \
    "$2" "$3" > "$1.comp"
  "$GLSLC" --target-env=vulkan1.2 -o "$1.spv" "$1.comp" || fail "glslc could not compile the planted $1"
}
shader clean "" "v[gl_GlobalInvocationID.x] *= 2.0;"
shader fp64 "" "double d = double(v[0]); v[1] = float(d * d);"
shader atomic "#extension GL_EXT_shader_atomic_float : require" "atomicAdd(v[0], 1.0);"
shader subgroup "#extension GL_KHR_shader_subgroup_arithmetic : require" "v[0] = subgroupAdd(v[1]);"
shader int64 "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require" "int64_t i = int64_t(v[0]); v[1] = float(i * i);"
"$EMBED" out.c clean=clean.spv > clean.txt 2>&1 || { cat clean.txt; fail "a clean module was refused"; }
grep -q "trm_spirv_modules" out.c || fail "no module table written"
for bad in fp64:Float64 atomic:AtomicFloat32AddEXT subgroup:GroupNonUniform; do
  name=${bad%%:*} cap=${bad#*:}
  "$EMBED" - "$name=$name.spv" > "$name.txt" 2>&1 && fail "the $name module was accepted"
  grep -q "declares the $cap capability" "$name.txt" || { cat "$name.txt"; fail "no $cap message"; }
done
"$EMBED" - int64=int64.spv > int64.txt 2>&1 && fail "a module with a capability outside the allowed list (Int64) was accepted"
grep -q "declares capability 11, which is not among" int64.txt || { cat int64.txt; fail "no message for Int64"; }
head -c $(( $(wc -c < clean.spv) - 2 )) clean.spv > trunc.spv
"$EMBED" - trunc=trunc.spv > trunc.txt 2>&1 && fail "a truncated module was accepted"
grep -q "cannot read trunc.spv" trunc.txt || { cat trunc.txt; fail "no message for a truncated module"; }
echo "spirv capability check: fp64, float atomics and subgroup operations, unlisted capabilities and truncated modules refused"
