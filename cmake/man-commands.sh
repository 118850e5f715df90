#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# man-commands.sh CKPT OUT: a help2man include file whose COMMANDS section holds every command's help (each
# command `CKPT --help` lists, as `CKPT COMMAND --help` gives it), so the manual page carries each command's
# arguments and options: the description, the usage line, one tagged paragraph per argument and option, and the
# closing text.
set -eu
ckpt="$1"
out="$2"
commands="$("$ckpt" --help | sed -n '/^Commands:$/,/^$/p' | sed -n 's/^  \([a-z][a-z]*\)  .*/\1/p')"
[ -n "$commands" ] || { echo "man-commands.sh: $ckpt --help lists no commands" >&2; exit 1; }
{
    echo "[COMMANDS]"
    for c in $commands; do
        echo ".SS \"ckpt $c\""
        # roff: a backslash is written \e, and a line must not start with . or ' (a request).
        "$ckpt" "$c" --help | sed -e 's/\\/\\e/g' | awk '
            function text(s) { sub(/^[ \t]+/, "", s); if (s ~ /^[.\047]/) s = "\\&" s; return s }
            /^(Arguments|Options):$/ { next }
            /^Usage: / { print ".PP"; print "\\fB" text(substr($0, 8)) "\\fR"; next }
            /^  [^ ]/ && match($0, /[^ ]   +/) {
                print ".TP"; print "\\fB" text(substr($0, 1, RSTART)) "\\fR"; print text(substr($0, RSTART + RLENGTH)); next
            }
            /^$/ { next }
            { print ".PP"; print text($0) }'
    done
} > "$out.tmp"
mv "$out.tmp" "$out"
