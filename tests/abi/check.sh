#!/bin/sh
# tests/abi/check.sh - compiles and runs the C ABI header tests with gcc and
# g++.  Needs no netdirect library: ndw_stub.c stands in for its exports.
#
#   tests/abi/check.sh            (from anywhere; CC/CXX override gcc/g++,
#                                  e.g. CC=clang-14 CXX=clang++-14)
#
# Covers:
#  1. every public header on its own (C99, C11, C++11, C++17, -pedantic);
#     the ND headers with only `-I include`, leaking no Windows macros
#  2. compile_all.c: all headers together in two include orders, then the
#     libstdc++ headers (__in/__out, min/max pitfalls), no ND method name
#     as a macro
#  3. layout.c / layout.cpp / layout_cinterface.cpp: widths, structure sizes
#     and offsets, status values, vtable slots of every v2 and v1 method in
#     the C form (offsetof) and the C++ form (pointer to member)
#  4. xcall: every method called C -> C++ object (through the COBJMACROS
#     helpers) and C++ -> C object (virtual calls into static vtables)
#  5. iids: the bytes of every IID; weak INITGUID copies in C and C++
#     linked beside a strong definition
#  6. runtime.c as C and C++: Interlocked*, WSAStringToAddress, InetPton,
#     the MSVC wprintf formats, CRT helpers; stdout compared with
#     runtime.expected (printf still works after wprintf); wprintf_smoke.c,
#     the examples' logging pattern, linked with no library at all
#  7. _tmain: the weak main in C, C++ and mixed programs, several
#     translation units, -O2 -flto, a program with its own main (same
#     translation unit as <tchar.h>, and beside a _tmain), the ANSI mode
#  8. windows_style.cpp: Windows-style ND C++ compiled with -Wall -Werror
#     (C++11 and C++17) and linked
# Exits non-zero if anything fails.

set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T="$ROOT/tests/abi"
CC=${CC:-gcc}
CXX=${CXX:-g++}
OUT=$(mktemp -d "${TMPDIR:-/tmp}/ndabi.XXXXXX")
trap 'rm -rf "$OUT"' EXIT INT TERM
cd "$ROOT" || exit 1

ND="-I include"
ALL="-I include -I include/win32 -I tests/abi"
W="-Wall -Wextra -Werror"
failed=0
passed=0

# step <description> <command...>: runs the command, records the result.
step() {
    desc=$1
    shift
    if "$@" >"$OUT/log" 2>&1; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL: $desc"
        sed 's/^/    /' "$OUT/log" | head -40
    fi
}

# expect_rc <rc> <command...>: the command must exit with status rc.
expect_rc() {
    want=$1
    shift
    "$@"
    got=$?
    if [ "$got" -ne "$want" ]; then
        echo "exit status $got, expected $want"
        return 1
    fi
    return 0
}

# 1. headers on their own -----------------------------------------------------
for h in ndspi.h nddef.h ndstatus.h ndsupport.h; do
    printf '#include <%s>\n#include <%s>\ntypedef int ndabi_not_empty;\n' "$h" "$h" >"$OUT/self.c"
    cp "$OUT/self.c" "$OUT/self.cpp"
    for std in c99 c11; do
        step "$h alone, $std, -I include only" \
            $CC -std=$std $W -pedantic $ND -c "$OUT/self.c" -o "$OUT/self.o"
    done
    for std in c++11 c++17; do
        step "$h alone, $std, -I include only" \
            $CXX -std=$std $W -pedantic $ND -c "$OUT/self.cpp" -o "$OUT/self.o"
    done
done
for h in windows.h winsock2.h ws2tcpip.h unknwn.h objbase.h guiddef.h initguid.h \
    ntstatus.h sal.h tchar.h process.h winerror.h basetsd.h; do
    printf '#include <%s>\n#include <%s>\ntypedef int ndabi_not_empty;\n' "$h" "$h" >"$OUT/self.c"
    cp "$OUT/self.c" "$OUT/self.cpp"
    step "$h alone, c11" $CC -std=c11 $W -pedantic $ALL -c "$OUT/self.c" -o "$OUT/self.o"
    step "$h alone, c++17" $CXX -std=c++17 $W -pedantic $ALL -c "$OUT/self.cpp" -o "$OUT/self.o"
done
# The internal headers must each be self-contained too.
for h in include/win32/ndw_*.h; do
    printf '#include "%s"\ntypedef int ndabi_not_empty;\n' "$ROOT/$h" >"$OUT/self.c"
    cp "$OUT/self.c" "$OUT/self.cpp"
    step "$(basename "$h") alone, c11" $CC -std=c11 $W $ALL -c "$OUT/self.c" -o "$OUT/self.o"
    step "$(basename "$h") alone, c++17" $CXX -std=c++17 $W $ALL -c "$OUT/self.cpp" -o "$OUT/self.o"
done
# With only -I include, ndspi.h must not bring the Windows program macros.
cat >"$OUT/nomacro.cpp" <<'SRC'
#include <ndsupport.h>
#if defined(min) || defined(max) || defined(wprintf) || defined(_tmain) || defined(UNICODE) || \
    defined(interface) || defined(VOID) || defined(CALLBACK) || defined(WINAPI) || \
    defined(__declspec) || defined(IN) || defined(OUT) || defined(CONTAINING_RECORD) || \
    defined(__in) || defined(__out) || defined(Sleep) || defined(CreateEvent)
#error "ndspi.h leaked a Windows program macro"
#endif
#include <algorithm>
#include <functional>
#include <map>
#include <string>
int main() { return std::min(0, 1); }
SRC
step "ndsupport.h with -I include only leaks no Windows program macros" \
    $CXX -std=c++17 $W $ND "$OUT/nomacro.cpp" -o "$OUT/nomacro"

# 2. everything together ---------------------------------------------------------
for order in 1 2; do
    for std in c99 c11; do
        step "compile_all.c order $order, $std" \
            $CC -std=$std $W -DNDABI_ORDER=$order $ALL "$T/compile_all.c" -o "$OUT/ca"
    done
    for std in c++11 c++17 c++20; do
        step "compile_all.c order $order, $std" \
            $CXX -std=$std $W -DNDABI_ORDER=$order $ALL -x c++ "$T/compile_all.c" -o "$OUT/ca"
    done
done
step "compile_all.c runs" "$OUT/ca"
# Stricter warnings than the programs need, so the headers stay quiet in
# projects that enable them.
STRICT_C="-Wformat=2 -Wformat-nonliteral -Wshadow -Wundef -Wcast-qual -Wpointer-arith -Wstrict-prototypes -Wmissing-prototypes -Wredundant-decls"
STRICT_CXX="-Wformat=2 -Wformat-nonliteral -Wshadow -Wundef -Wcast-qual -Wpointer-arith -Wredundant-decls -Wnon-virtual-dtor -Wold-style-cast -Wzero-as-null-pointer-constant -Woverloaded-virtual -Wsuggest-override"
echo 'int ndabi;' >"$OUT/probe.cpp"
# -Wuseless-cast is GCC's only.
$CXX -Werror -Wuseless-cast -c "$OUT/probe.cpp" -o "$OUT/probe.o" 2>/dev/null &&
    STRICT_CXX="$STRICT_CXX -Wuseless-cast"
step "compile_all.c with $STRICT_C" $CC -std=c11 $W $STRICT_C $ALL -c "$T/compile_all.c" -o "$OUT/ca.o"
printf '#include <ntstatus.h>\n#define WIN32_NO_STATUS\n#include <windows.h>\n#include <ws2tcpip.h>\n#include <tchar.h>\n#include <process.h>\n#include <ndsupport.h>\n#include <map>\n#include <functional>\n' >"$OUT/strict.cpp"
step "all headers with $STRICT_CXX" $CXX -std=c++17 $W $STRICT_CXX $ALL -c "$OUT/strict.cpp" -o "$OUT/strict.o"
step "all headers with -O2 -D_FORTIFY_SOURCE=2 (C++)" \
    $CXX -std=c++17 -O2 -D_FORTIFY_SOURCE=2 $W $ALL -x c++ "$T/compile_all.c" -o "$OUT/ca"
step "all headers with -O2 -D_FORTIFY_SOURCE=2 (C)" \
    $CC -std=c11 -O2 -D_FORTIFY_SOURCE=2 $W $ALL "$T/compile_all.c" -o "$OUT/ca"

# The stand-in for libnetdirect's exports.
step "ndw_stub.c" $CC -std=c11 $W $ALL -c "$T/ndw_stub.c" -o "$OUT/stub.o"
step "ndw_stub_iids.c" $CC -std=c11 $W $ALL -c "$T/ndw_stub_iids.c" -o "$OUT/stub_iids.o"

# 3. layouts and slots --------------------------------------------------------------
for std in c11 gnu11; do
    step "layout.c, $std" $CC -std=$std $W $ALL "$T/layout.c" -o "$OUT/layout_c"
    step "layout.c runs" "$OUT/layout_c"
done
for std in c++11 c++17; do
    step "layout.cpp, $std" $CXX -std=$std $W $ALL "$T/layout.cpp" -o "$OUT/layout_cpp"
    step "layout.cpp runs (C++ vtable slots)" "$OUT/layout_cpp"
done
step "layout_cinterface.cpp (CINTERFACE in C++)" \
    $CXX -std=c++17 $W $ALL -c "$T/layout_cinterface.cpp" -o "$OUT/lci.o"

# 4. cross-language calls ---------------------------------------------------------------
for opt in -O0 -O2; do
    step "xcall C half $opt" $CC -std=c11 $opt $W $ALL -c "$T/gen_xcall_c.c" -o "$OUT/xc.o"
    step "xcall main $opt" $CC -std=c11 $opt $W $ALL -c "$T/xcall_main.c" -o "$OUT/xm.o"
    step "xcall C++ half $opt" $CXX -std=c++17 $opt $W $ALL -c "$T/gen_xcall_cpp.cpp" -o "$OUT/xp.o"
    step "xcall link $opt" $CXX "$OUT/xc.o" "$OUT/xm.o" "$OUT/xp.o" -o "$OUT/xcall"
    step "xcall runs $opt (C calls C++ objects, C++ calls C objects)" "$OUT/xcall"
done

# 5. IIDs -------------------------------------------------------------------------------
step "iids.c" $CC -std=c11 $W $ALL -c "$T/iids.c" -o "$OUT/iids.o"
step "iids_cpp.cpp" $CXX -std=c++17 $W $ALL -c "$T/iids_cpp.cpp" -o "$OUT/iids_cpp.o"
step "iids link (weak C and C++ copies beside a strong one)" \
    $CXX "$OUT/iids.o" "$OUT/iids_cpp.o" "$OUT/stub.o" -o "$OUT/iids"
step "iids runs" "$OUT/iids"

# 6. header-only run-time behaviour -------------------------------------------------------
run_runtime() {
    "$1" >"$OUT/runtime.out" || return 1
    cmp -s "$OUT/runtime.out" "$T/runtime.expected" || {
        echo "stdout differs from runtime.expected:"
        diff "$T/runtime.expected" "$OUT/runtime.out"
        return 1
    }
}
for std in c99 c11; do
    step "runtime.c as C, $std" $CC -std=$std $W $ALL "$T/runtime.c" "$OUT/stub.o" -o "$OUT/rt"
    step "runtime.c as C runs, $std" run_runtime "$OUT/rt"
done
for std in c++11 c++17; do
    step "runtime.c as C++, $std" \
        $CXX -std=$std $W $ALL -x c++ "$T/runtime.c" -x none "$OUT/stub.o" -o "$OUT/rt"
    step "runtime.c as C++ runs, $std" run_runtime "$OUT/rt"
done
step "runtime.c as C++, -O2" \
    $CXX -std=c++17 -O2 $W $ALL -x c++ "$T/runtime.c" -x none "$OUT/stub.o" -o "$OUT/rt"
step "runtime.c as C++ runs, -O2" run_runtime "$OUT/rt"

smoke_out() {
    out=$("$1" ndping.exe) || return 1
    [ "$out" = "Beginning test: ndping.exe
printf still works: 42
End of test: ndping.exe (4194304 bytes)" ] || { echo "unexpected output:"; echo "$out"; return 1; }
}
step "wprintf_smoke.c as C, no library" $CC -std=c11 $W $ALL "$T/wprintf_smoke.c" -o "$OUT/smoke"
step "wprintf_smoke (C) prints %s wide, then printf" smoke_out "$OUT/smoke"
step "wprintf_smoke.c as C++, no library" \
    $CXX -std=c++17 $W $ALL -x c++ "$T/wprintf_smoke.c" -o "$OUT/smoke"
step "wprintf_smoke (C++) prints %s wide, then printf" smoke_out "$OUT/smoke"

# 7. _tmain -----------------------------------------------------------------------------
UTF8=C.UTF-8
locale -a 2>/dev/null | grep -qi '^c\.utf-\?8$' || UTF8=en_US.UTF-8
run_tmain() {
    out=$(LC_ALL=$UTF8 "$1" -s "héllo")
    rc=$?
    [ "$rc" -eq 42 ] || { echo "exit status $rc, expected 42"; echo "$out"; return 1; }
    [ "$out" = "args: -s héllo
other=7" ] || { echo "unexpected output: $out"; return 1; }
}
tmain_build() { # <name> <compiler for tmain_main.c> <compiler for the others> <flags>
    name=$1 a=$2 b=$3 flags=$4
    $a $flags $W $ALL -c "$T/tmain_main.c" -o "$OUT/$name.main.o" &&
        $b $flags $W $ALL -c "$T/tmain_other.c" -o "$OUT/$name.other.o" &&
        $b $flags $W $ALL -c "$T/realmain.c" -o "$OUT/$name.real.o" &&
        $CXX $flags "$OUT/$name.main.o" "$OUT/$name.other.o" "$OUT/stub.o" -o "$OUT/$name" &&
        $CXX $flags "$OUT/$name.real.o" "$OUT/$name.other.o" "$OUT/stub.o" -o "$OUT/$name.real" &&
        $CXX $flags "$OUT/$name.real.o" "$OUT/$name.main.o" "$OUT/$name.other.o" "$OUT/stub.o" \
            -o "$OUT/$name.both"
}
for variant in \
    "c:$CC -std=c11:$CC -std=c11:-O0" \
    "cxx:$CXX -std=c++17 -x c++:$CXX -std=c++17 -x c++:-O0" \
    "mixed:$CXX -std=c++11 -x c++:$CC -std=c99:-O0" \
    "c_lto:$CC -std=c11:$CC -std=c11:-O2 -flto" \
    "cxx_lto:$CXX -std=c++17 -x c++:$CXX -std=c++17 -x c++:-O2 -flto"; do
    name=${variant%%:*}
    rest=${variant#*:}
    a=${rest%%:*}
    rest=${rest#*:}
    b=${rest%%:*}
    flags=${rest#*:}
    step "_tmain build ($name)" tmain_build "$name" "$a" "$b" "$flags"
    step "_tmain runs through the weak main ($name)" run_tmain "$OUT/$name"
    step "own main beside <tchar.h> runs ($name)" expect_rc 17 "$OUT/$name.real" x
    step "own main wins over the weak main ($name)" expect_rc 17 "$OUT/$name.both"
done
step "tmain_ansi.c (ND_COMPAT_ANSI)" $CC -std=c11 $W $ALL "$T/tmain_ansi.c" -o "$OUT/ansi"
step "tmain_ansi.c runs" expect_rc 43 "$OUT/ansi" -s
step "tmain_ansi.c as C++" $CXX -std=c++17 $W $ALL -x c++ "$T/tmain_ansi.c" -o "$OUT/ansi"
step "tmain_ansi.c as C++ runs" expect_rc 43 "$OUT/ansi" -s

# 8. Windows-style C++ -------------------------------------------------------------------
for std in c++11 c++17; do
    step "windows_style.cpp -Wall -Werror, $std" \
        $CXX -std=$std -Wall -Werror $ALL -c "$T/windows_style.cpp" -o "$OUT/ws.o"
done
step "windows_style.cpp -Wall -Wextra (but missing-field-initializers) -Werror" \
    $CXX -std=c++17 $W -Wno-missing-field-initializers $ALL -c "$T/windows_style.cpp" -o "$OUT/ws.o"
step "windows_style.cpp links" $CXX "$OUT/ws.o" "$OUT/stub.o" "$OUT/stub_iids.o" -o "$OUT/ws"

echo "tests/abi: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
