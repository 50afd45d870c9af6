#!/usr/bin/env python3
"""English→Chinese parallel text for the bundled demo model, from gettext catalogues (issue 7).

    /work/venv/bin/python tools/demo_data.py                       # system + staged catalogues → /work/demo-data
    /work/venv/bin/python tools/demo_data.py --out DIR --no-staged  # only what dpkg has installed

Software messages translated into Simplified Chinese are real en→zh parallel text.  This walks
/usr/share/locale/zh_CN/LC_MESSAGES/*.mo (the installed Debian packages; owner found with `dpkg -S`) and,
unless --no-staged, the package trees that tools/install_demo_corpus.sh unpacked under
OUT/pkgroot/<package>/ (every `.../zh_CN*/LC_MESSAGES/*.mo`, and the zh-CN, zh_Hans, zh_HANS, zh-Hans
spellings some projects use, e.g. LibreOffice and Blender: the owner is the folder name).  Each package's licence comes from its usr/share/doc/<pkg>/copyright.

Cleaning, per (msgid, msgstr[0]) entry:
  - header, empty, untranslated (msgstr == msgid) and translator-credit entries are dropped; .mo files carry
    no fuzzy entries (msgfmt leaves them out unless --use-fuzzy), so there is nothing else to skip there;
  - msgctxt is dropped (kept only as part of the raw entry count); plural entries pair the singular msgid
    with msgstr[0] (Chinese has one plural form) and the plural msgid with it too;
  - accelerators: `_` / `&` mnemonics are removed from the English (`_Open`, `Save _As`, `&File`) and
    `(_O)` `（&O）` `_文` forms from the Chinese, only when one side shows it is a mnemonic (see strip_accel);
  - multi-line entries are paired line by line when both sides have the same number of lines, else kept
    whole (newlines → spaces) if short, else dropped;
  - whitespace runs collapse to one space; format-only entries (nothing but placeholders, digits and
    punctuation in the English) and entries whose Chinese has no Han character are dropped;
  - placeholders (printf `%s %1$d %-10lu`, Python `%(name)s`, `{0}` `{name}`, Qt `%1`, `${var}`) must
    agree between the two sides as typed lists in argument order, else the pair is dropped.
Then exact duplicates are merged and the data is split train/dev/test by a group key (English casefolded,
placeholders and non-alphanumerics removed), so no English string — nor a variant differing only in case,
punctuation or ellipsis — is in two splits.  dev/test keep one pair per English string (its most frequent
translation); train keeps every distinct translation.

Writes (OUT, default /work/demo-data, outside the repo):
  train.en train.zh dev.en dev.zh test.en test.zh   one sentence per line, aligned
  pairs.tsv        split, English, Chinese, packages (every kept pair)
  sources.tsv      catalogue, package, version, licence, raw entries, pairs kept
  stats.json       counts per cleaning step, per package and per split
  licences.md      a markdown table of packages and licences for the model card
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import struct
import subprocess
import sys
import unicodedata
from collections import Counter, defaultdict
from pathlib import Path

sys.dont_write_bytecode = True  # no tools/__pycache__ in the work tree
from common import logger  # tools/common.py

SEED = 20261202
DEFAULT_OUT = Path("/work/demo-data")
SYSTEM_DIR = Path("/usr/share/locale/zh_CN/LC_MESSAGES")

HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
LATIN = re.compile(r"[A-Za-z]")
# printf conversions (with %n$ positions, flags, width, precision, length), Python %(name)s, {0} / {name}
# (str.format and GLib/ICU style), Qt / KDE %1, shell-ish ${var}.  %% is a literal, not a placeholder.
PH = re.compile(
    r"%%"
    r"|%(?P<pos>\d+)\$[-+ 0#']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?P<len1>hh|h|ll|l|L|q|j|z|Z|t)?(?P<conv1>[diouxXeEfFgGaAcspnm])"
    r"|%\((?P<name>[A-Za-z0-9_.-]+)\)[-+ 0#]*\d*(?:\.\d+)?(?P<conv2>[diouxXeEfFgGrsac])"
    r"|%[-+ 0#']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?P<len3>hh|h|ll|l|L|q|j|z|Z|t|I64|I32)?(?P<conv3>[diouxXeEfFgGaAcspm])"
    r"|%<PRI[diouxX](?:8|16|32|64|MAX|PTR)>"
    r"|%(?P<qt>\d{1,2})(?![\d$])"
    r"|\{(?P<brace>[A-Za-z0-9_]*)(?::[^{}]*)?\}"
    r"|\$\{[A-Za-z0-9_]+\}"
)
CREDITS = {"translator-credits", "translator_credits", "Your names", "Your emails", "translator-credits\n",
           "TRANSLATORS", "Translator credits"}
CREDIT_CTXT = {"NAME OF TRANSLATORS", "EMAIL OF TRANSLATORS"}


log = logger("demo_data")


# ----------------------------------------------------------------------------------------------------------
# .mo reading (GNU gettext binary format; no msgunfmt needed)
# ----------------------------------------------------------------------------------------------------------

def read_mo(path: Path):
    """Yield (context or None, [msgid, msgid_plural?], [msgstr forms]) for every entry, the header included
    (msgid "").  Raises ValueError on a malformed file."""
    data = path.read_bytes()
    if len(data) < 28:
        raise ValueError("too short for a .mo header")
    magic = struct.unpack("<I", data[:4])[0]
    if magic == 0x950412DE:
        end = "<"
    elif magic == 0xDE120495:
        end = ">"
    else:
        raise ValueError("bad magic %08x" % magic)
    _rev, n, orig_off, trans_off = struct.unpack(end + "4I", data[4:20])
    if n > len(data) // 16 or orig_off + 8 * n > len(data) or trans_off + 8 * n > len(data):
        raise ValueError("string tables out of range")
    charset = "utf-8"
    entries = []
    for i in range(n):
        ol, oo = struct.unpack(end + "2I", data[orig_off + 8 * i: orig_off + 8 * i + 8])
        tl, to = struct.unpack(end + "2I", data[trans_off + 8 * i: trans_off + 8 * i + 8])
        if oo + ol > len(data) or to + tl > len(data):
            raise ValueError("string %d out of range" % i)
        entries.append((data[oo:oo + ol], data[to:to + tl]))
    for k, v in entries:  # the header says which charset the rest uses
        if k == b"":
            m = re.search(rb"charset=([A-Za-z0-9_-]+)", v)
            if m:
                charset = m.group(1).decode("ascii")
    try:
        "".encode(charset)
    except LookupError:
        charset = "utf-8"
    for k, v in entries:
        ks = k.decode(charset, errors="replace")
        vs = v.decode(charset, errors="replace")
        ctx = None
        if "\x04" in ks:
            ctx, ks = ks.split("\x04", 1)
        yield ctx, ks.split("\x00"), vs.split("\x00")


def mo_header(path: Path) -> dict:
    for ctx, ids, strs in read_mo(path):
        if ctx is None and ids[0] == "":
            out = {}
            for line in strs[0].split("\n"):
                if ":" in line:
                    a, b = line.split(":", 1)
                    out[a.strip()] = b.strip()
            return out
    return {}


# ----------------------------------------------------------------------------------------------------------
# provenance: package of a file, its version and licence
# ----------------------------------------------------------------------------------------------------------

def dpkg_owner(path: Path) -> str:
    r = subprocess.run(["dpkg", "-S", str(path)], capture_output=True, text=True)
    if r.returncode != 0 or ":" not in r.stdout:
        return "?"
    return r.stdout.split(":")[0].split(",")[0].strip()


def dpkg_version(pkg: str) -> str:
    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "?"


LICENCE_WORDS = [  # for copyright files that are not machine-readable (DEP-5)
    (r"Lesser General Public License|Library General Public License|\bLGPL", "LGPL"),
    (r"(?<!Lesser )(?<!Library )GNU General Public License|\bGPL(?!-?compatible)|common-licenses/GPL", "GPL"),
    (r"Mozilla Public License|\bMPL", "MPL"),
    (r"Apache License", "Apache"),
    (r"\bBSD\b|Redistribution and use in source and binary forms", "BSD"),
    (r"Permission is hereby granted, free of charge|\bMIT\b|\bExpat\b", "MIT/Expat"),
    (r"PostgreSQL", "PostgreSQL"),
]


def licence_from_copyright(cp: Path) -> str:
    """The licence of a package's `Files: *` stanza (DEP-5), plus the other licences named; for old-style
    copyright files, the licence families the text mentions."""
    if not cp.exists():
        return "no copyright file found"
    text = cp.read_text(errors="replace")
    if re.search(r"^Format:\s*\S*(dep5|copyright-format)", text, re.M | re.I):
        main, others = None, []
        for para in re.split(r"\n\s*\n", text):
            files = re.search(r"^Files:\s*(.*(?:\n[ \t].*)*)", para, re.M)
            lic = re.search(r"^License:\s*(.+)", para, re.M)
            if not lic:
                continue
            name = lic.group(1).strip()
            if files and main is None and "*" in files.group(1).split():
                main = name
            elif files and name not in others:
                others.append(name)
        if main is None and others:
            main, others = others[0], others[1:]
        others = [o for o in others if o != main]
        if main:
            return main + (" (other files: " + ", ".join(others[:5]) + ("…" if len(others) > 5 else "") + ")"
                           if others else "")
    fams = [name for pat, name in LICENCE_WORDS if re.search(pat, text)]
    m = re.search(r"version (\d(?:\.\d)?)[^.]{0,60}or \(at your option\) any later", text)
    if m and fams and fams[0] in ("GPL", "LGPL"):
        fams[0] += "-" + m.group(1) + "+"
    return ", ".join(fams) + " (free-text copyright file)" if fams else "see copyright file"


# ----------------------------------------------------------------------------------------------------------
# cleaning
# ----------------------------------------------------------------------------------------------------------

ZH_ACCEL = re.compile(r"\s*[（(]\s*([_&~])\s*([A-Za-z0-9])\s*[)）]")  # 打开(_O)  文件（&F）  创建(~R)
ZH_ACCEL_TAIL = re.compile(r"\s*[（(]([A-Za-z0-9])[)）](?=\s*(?:\.\.\.|…|:|：)?\s*$)")  # 打开(O)... after strip
ZH_UNDERSCORE_HAN = re.compile(r"_(?=[\u3400-\u9fff])")  # _打开
EN_ACCEL_US = re.compile(r"(?<!_)_(?=[A-Za-z0-9])")
EN_ACCEL_AMP = re.compile(r"(?<!&)&(?=[A-Za-z0-9])(?![A-Za-z0-9#]+;)")
EN_ACCEL_TILDE = re.compile(r"~(?=[A-Za-z0-9])")  # LibreOffice; only with (~X) in the Chinese (~a is Lisp format)


def strip_accel(en: str, zh: str):
    """Remove mnemonic markers.  The Chinese decides: `(_O)`/`(&O)`/`(~O)`, or `_` before a Han character, or
    no `_`/`&` at all while the English has exactly one candidate marker — then the English marker is a
    mnemonic.  If the Chinese keeps the same `_`-joined word (shared_buffers) the underscore is real text;
    `~` is removed only when the Chinese shows `(~X)` (LibreOffice), since `~a` is a Lisp format directive."""
    marks = {m.group(1) for m in ZH_ACCEL.finditer(zh)}
    zh2 = ZH_ACCEL.sub("", zh)
    zh_marked = zh2 != zh
    if "~" in marks and len(EN_ACCEL_TILDE.findall(en)) == 1:
        en = EN_ACCEL_TILDE.sub("", en, count=1)
    zh3 = ZH_UNDERSCORE_HAN.sub("", zh2)
    zh_marked = zh_marked or zh3 != zh2
    zh = zh3
    for pat, ch in ((EN_ACCEL_US, "_"), (EN_ACCEL_AMP, "&")):
        hits = pat.findall(en)
        if len(hits) == 1 and (zh_marked or ch not in zh):
            en = pat.sub("", en, count=1)
    en = en.replace("__", "_") if "__" in en and "__" not in zh and "_" in zh else en
    en = en.replace("&&", "&") if "&&" in en else en
    zh = zh.replace("&&", "&") if "&&" in zh else zh
    return en, zh


def placeholders(s: str):
    """Typed placeholder list in argument order (explicit %n$ / %n positions respected), or None when the
    printf positions are inconsistent."""
    seq, pos_items, qt, named = [], [], [], []
    i = 0
    for m in PH.finditer(s):
        t = m.group(0)
        if t == "%%":
            continue
        if m.group("conv1"):
            pos_items.append((int(m.group("pos")), (m.group("len1") or "") + m.group("conv1")))
        elif m.group("conv2"):
            named.append("%(" + m.group("name") + ")" + m.group("conv2"))
        elif m.group("conv3"):
            if m.group("conv3") == "m":  # glibc's strerror(errno): takes no argument
                named.append("%m")
            else:
                seq.append((i, (m.group("len3") or "") + m.group("conv3")))
                i += 1
        elif t.startswith("%<PRI"):
            seq.append((i, t))
            i += 1
        elif m.group("qt"):
            qt.append("%" + m.group("qt"))
        elif t.startswith("{"):
            named.append("{" + (m.group("brace") or "") + "}")
        else:
            named.append(t)
    if pos_items and seq:
        return None
    printf = [c for _, c in sorted(pos_items)] if pos_items else [c for _, c in seq]
    return printf, sorted(qt), sorted(named)


def format_only(en: str) -> bool:
    rest = PH.sub(" ", en)
    return not re.search(r"[A-Za-z]{2,}", rest)


def norm_ws(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def group_key(en: str) -> str:
    """English variants that differ only in case, placeholders, punctuation or spacing share a key (and so
    a split): Open file / Open File… / _Open file."""
    s = PH.sub(" ", en).casefold()
    return "".join(ch for ch in s if ch.isalnum())


def clean_entry(msgid: str, msgstr: str, why: Counter):
    """Yield cleaned (en, zh) pairs of one catalogue entry; count what was dropped in `why`."""
    if not msgstr.strip():
        why["empty"] += 1
        return
    if msgstr == msgid:
        why["identical"] += 1
        return
    en_lines = [l for l in msgid.split("\n")]
    zh_lines = [l for l in msgstr.split("\n")]
    while en_lines and not en_lines[-1].strip():
        en_lines.pop()
    while zh_lines and not zh_lines[-1].strip():
        zh_lines.pop()
    if len(en_lines) > 1 or len(zh_lines) > 1:
        if len(en_lines) == len(zh_lines):
            pieces = list(zip(en_lines, zh_lines))
        elif len(msgid) <= 300:
            pieces = [(" ".join(en_lines), " ".join(zh_lines))]
        else:
            why["multiline_mismatch"] += 1
            return
    else:
        pieces = [(msgid, msgstr)]
    for en, zh in pieces:
        en, zh = strip_accel(norm_ws(unicodedata.normalize("NFC", en)), norm_ws(unicodedata.normalize("NFC", zh)))
        en, zh = norm_ws(en), norm_ws(zh)
        if not en or not zh:
            why["empty"] += 1
            continue
        if en == zh:
            why["identical"] += 1
            continue
        if not LATIN.search(en) or format_only(en):
            why["format_only"] += 1
            continue
        if not HAN.search(zh):
            why["no_han_in_chinese"] += 1
            continue
        pe, pz = placeholders(en), placeholders(zh)
        if pe is None or pz is None or pe != pz:
            why["placeholder_mismatch"] += 1
            continue
        if len(en) > 1000 or len(zh) > 1000:
            why["too_long"] += 1
            continue
        # a wildly different length means a mis-split line pair or a note instead of a translation
        if len(zh) > 3 * len(en) + 20 or len(en) > 12 * len(zh) + 20:
            why["length_ratio"] += 1
            continue
        yield en, zh


def entries_of(path: Path, why: Counter):
    """(en, zh) pairs of one .mo file and the number of raw entries."""
    raw = 0
    out = []
    for ctx, ids, strs in read_mo(path):
        if ctx is None and ids[0] == "":
            continue  # header
        raw += 1
        if ids[0] in CREDITS or (ctx in CREDIT_CTXT):
            why["translator_credits"] += 1
            continue
        zh = strs[0] if strs else ""
        for msgid in ids[:2]:
            out.extend(clean_entry(msgid, zh, why))
    return raw, out


# ----------------------------------------------------------------------------------------------------------
# catalogues: system and staged
# ----------------------------------------------------------------------------------------------------------

def find_catalogues(staged_root: Path | None, system: bool):
    """[(path, package, version, copyright path, origin)] sorted by package then path."""
    cats = []
    if system and SYSTEM_DIR.is_dir():
        owners = {}
        for f in sorted(SYSTEM_DIR.glob("*.mo")):
            pkg = dpkg_owner(f)
            if pkg not in owners:
                owners[pkg] = dpkg_version(pkg) if pkg != "?" else "?"
            cats.append((f, pkg, owners[pkg], Path("/usr/share/doc") / pkg / "copyright", "installed"))
    seen_pkgs = {c[1] for c in cats}
    if staged_root is not None and staged_root.is_dir():
        for pdir in sorted(p for p in staged_root.iterdir() if p.is_dir()):
            pkg = pdir.name
            if pkg in seen_pkgs:  # installed on the system too: the system copy was read already
                continue
            ver_file = pdir / ".version"
            ver = ver_file.read_text().strip() if ver_file.exists() else "?"
            mos = set()
            for d in ("zh_CN*", "zh-CN", "zh_Hans", "zh_HANS", "zh-Hans"):
                mos |= set(pdir.glob(f"**/{d}/LC_MESSAGES/*.mo"))
            cp = pdir / "usr/share/doc" / pkg / "copyright"
            link = pdir / ".doclink"
            if not cp.exists() and link.exists():  # doc folder is a symlink to a sibling package's
                sib = link.read_text().strip()
                for cand in (staged_root / sib / "usr/share/doc" / sib / "copyright",
                             Path("/usr/share/doc") / sib / "copyright", *staged_root.glob(f"*/usr/share/doc/{sib}/copyright")):
                    if cand.exists():
                        cp = cand
                        break
            for f in sorted(mos):
                cats.append((f, pkg, ver, cp, "unpacked"))
    return cats


def split_pairs(pairs: dict, n_dev: int, n_test: int, seed: int):
    """pairs: {(en, zh): count}.  Returns {split: [(en, zh)]}: groups of English variants go whole into one
    split, chosen by a seeded shuffle of the sorted group keys; dev/test keep one pair per English string."""
    groups = defaultdict(list)
    for (en, zh) in pairs:
        groups[group_key(en)].append((en, zh))
    keys = sorted(groups)
    rng = random.Random(seed)
    rng.shuffle(keys)
    test_keys, dev_keys = set(keys[:n_test]), set(keys[n_test:n_test + n_dev])
    out = {"train": [], "dev": [], "test": []}
    for k in sorted(groups):
        split = "test" if k in test_keys else "dev" if k in dev_keys else "train"
        items = groups[k]
        if split == "train":
            out[split].extend(sorted(items))
        else:
            best = {}
            for en, zh in items:
                c = pairs[(en, zh)]
                if en not in best or (c, -len(zh)) > (best[en][1], -len(best[en][0])):
                    best[en] = (zh, c)
            out[split].extend((en, best[en][0]) for en in sorted(best))
    rng2 = random.Random(seed + 1)
    for s in out:
        rng2.shuffle(out[s])
    return out, len(keys)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default /work/demo-data)")
    ap.add_argument("--staged", type=Path, default=None,
                    help="unpacked package trees (default OUT/pkgroot, from tools/install_demo_corpus.sh)")
    ap.add_argument("--no-staged", action="store_true", help="only the installed packages' catalogues")
    ap.add_argument("--no-system", action="store_true", help="only the unpacked packages' catalogues")
    ap.add_argument("--dev", type=int, default=2000, help="English groups in the dev split (default 2000)")
    ap.add_argument("--test", type=int, default=2000, help="English groups in the test split (default 2000)")
    ap.add_argument("--seed", type=int, default=SEED)
    args = ap.parse_args(argv)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    staged = None if args.no_staged else (args.staged or out / "pkgroot")
    cats = find_catalogues(staged, system=not args.no_system)
    if not cats:
        log("no catalogues found")
        return 2
    log(f"{len(cats)} catalogues from {len({c[1] for c in cats})} packages")

    why = Counter()
    pairs = Counter()           # (en, zh) -> number of catalogues carrying it
    owners = defaultdict(set)   # (en, zh) -> packages
    sources = []
    pkg_info = {}
    pkg_pairs = defaultdict(set)
    for path, pkg, ver, cp, origin in cats:
        try:
            raw, got = entries_of(path, why)
        except (ValueError, struct.error) as e:
            log("skip", path, e)
            why["unreadable_catalogue"] += 1
            continue
        hdr = {}
        try:
            hdr = mo_header(path)
        except Exception:
            pass
        uniq = set(got)
        for p in uniq:
            pairs[p] += 1
            owners[p].add(pkg)
        pkg_pairs[pkg] |= uniq
        if pkg not in pkg_info:
            pkg_info[pkg] = {"version": ver, "licence": licence_from_copyright(cp), "origin": origin}
        sources.append({"catalogue": str(path), "package": pkg, "project": hdr.get("Project-Id-Version", ""),
                        "raw_entries": raw, "pairs": len(uniq)})
        why["raw_entries"] += raw

    splits, n_groups = split_pairs(pairs, args.dev, args.test, args.seed)
    for s, items in splits.items():
        with open(out / f"{s}.en", "w", encoding="utf-8", newline="\n") as fe, \
                open(out / f"{s}.zh", "w", encoding="utf-8", newline="\n") as fz:
            for en, zh in items:
                fe.write(en + "\n")
                fz.write(zh + "\n")
    split_of = {p: s for s, items in splits.items() for p in items}
    with open(out / "pairs.tsv", "w", encoding="utf-8", newline="\n") as f:
        f.write("split\tenglish\tchinese\tpackages\n")
        for p in sorted(pairs):
            f.write(f"{split_of.get(p, 'dropped_alt')}\t{p[0]}\t{p[1]}\t{','.join(sorted(owners[p]))}\n")

    # unique contribution: pairs that only this package has
    only = Counter()
    for p, o in owners.items():
        if len(o) == 1:
            only[next(iter(o))] += 1
    with open(out / "sources.tsv", "w", encoding="utf-8", newline="\n") as f:
        f.write("catalogue\tpackage\tversion\tlicence\tproject\traw_entries\tpairs\n")
        for s in sources:
            i = pkg_info[s["package"]]
            f.write(f"{s['catalogue']}\t{s['package']}\t{i['version']}\t{i['licence']}\t{s['project']}\t"
                    f"{s['raw_entries']}\t{s['pairs']}\n")
    per_pkg = {pkg: {"version": pkg_info[pkg]["version"], "licence": pkg_info[pkg]["licence"],
                     "origin": pkg_info[pkg]["origin"], "pairs": len(pkg_pairs[pkg]), "pairs_only_here": only[pkg]}
               for pkg in sorted(pkg_info)}
    with open(out / "licences.md", "w", encoding="utf-8", newline="\n") as f:
        f.write("| Debian package | version | licence (debian/copyright, `Files: *`) | pairs | only here |\n")
        f.write("| --- | --- | --- | ---: | ---: |\n")
        for pkg, d in sorted(per_pkg.items(), key=lambda kv: -kv[1]["pairs"]):
            f.write(f"| {pkg} | {d['version']} | {d['licence'].replace('|', '/')} | {d['pairs']} | "
                    f"{d['pairs_only_here']} |\n")
    stats = {
        "catalogues": len(sources), "packages": len(per_pkg),
        "steps": dict(sorted(why.items())),
        "distinct_pairs": len(pairs), "distinct_english": len({e for e, _ in pairs}), "english_groups": n_groups,
        "splits": {s: len(v) for s, v in splits.items()},
        "dropped_alternative_translations_in_dev_test": len(pairs) - sum(len(v) for v in splits.values()),
        "split_check_shared_english": 0,
        "seed": args.seed,
        "per_package": per_pkg,
    }
    ens = {s: {e for e, _ in v} for s, v in splits.items()}
    keys = {s: {group_key(e) for e in v} for s, v in ens.items()}
    shared = len(ens["train"] & ens["dev"]) + len(ens["train"] & ens["test"]) + len(ens["dev"] & ens["test"])
    shared_keys = len(keys["train"] & keys["dev"]) + len(keys["train"] & keys["test"]) + len(keys["dev"] & keys["test"])
    stats["split_check_shared_english"] = shared
    stats["split_check_shared_groups"] = shared_keys
    with open(out / "stats.json", "w", encoding="utf-8") as f:
        json.dump(stats, f, ensure_ascii=False, indent=1)
        f.write("\n")
    if shared or shared_keys:
        log(f"BUG: {shared} English strings / {shared_keys} groups shared across splits")
        return 1
    h = hashlib.sha256()
    for s in ("train", "dev", "test"):
        h.update((out / f"{s}.en").read_bytes())
        h.update((out / f"{s}.zh").read_bytes())
    log(f"raw entries {why['raw_entries']}, distinct pairs {len(pairs)}, English strings "
        f"{stats['distinct_english']}, groups {n_groups}")
    log("dropped: " + ", ".join(f"{k} {v}" for k, v in sorted(why.items()) if k != "raw_entries"))
    log(f"splits: train {len(splits['train'])}, dev {len(splits['dev'])}, test {len(splits['test'])}; "
        f"data sha256 {h.hexdigest()[:16]}")
    top = sorted(per_pkg.items(), key=lambda kv: -kv[1]["pairs"])[:15]
    log("largest sources: " + ", ".join(f"{p} {d['pairs']}" for p, d in top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
