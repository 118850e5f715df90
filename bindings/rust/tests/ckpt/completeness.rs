// SPDX-License-Identifier: Apache-2.0
//! The binding against the installed header: every `CKPT_API` function declared in sys.rs and reached by the safe
//! API, every constant declared with the header's value, every struct with the header's fields in its order.
//! When ckpt.h grows, these fail until the binding grows with it.
//!
//! The header is `$CKPT_HEADER` (the CMake test sets it to the staged install's), else
//! `<pkg-config includedir of ckpt>/ckpt/ckpt.h`. libckpt_s3's header, `ckpt_s3.h` beside it, is checked the
//! same way against `src/sys/s3.rs` and the `s3` feature's safe API (`src/s3.rs`); these checks read the source,
//! so they run with or without the feature, and say they are skipped where ckpt_s3.h is not installed (a ckpt
//! built without libcurl).
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Functions the safe API does not call, each with the reason it needs no wrapper. Every other function of
/// ckpt.h is reached (the `*_options_init` ones too, since the safe API takes the library's defaults from them
/// rather than repeating them).
const NOT_WRAPPED: &[(&str, &str)] = &[(
    "ckpt_error_set",
    "for C libraries that extend ckpt with functions of their own (libckpt_s3 is one) to report their failures \
     as ckpt's; Rust code returns ckpt::Error, and the binding's callbacks hand their words to the library with \
     ckpt_error_set_message",
)];

/// `#define`s of ckpt_s3.h that are not constants a binding declares.
const NOT_S3_CONSTANTS: &[(&str, &str)] = &[
    ("CKPT_CKPT_S3_H", "the include guard"),
    ("CKPT_S3_API", "the export attribute of declarations"),
    ("CKPT_S3_OPTIONS_INIT", "an initializer; the safe API fills the struct with ckpt_s3_options_init"),
];

/// `#define`s of ckpt.h that are not constants a binding declares.
const NOT_CONSTANTS: &[(&str, &str)] = &[
    ("CKPT_CKPT_H", "the include guard"),
    ("CKPT_SYS_ERRORS_H", "the include guard of ckpt/sys/errors.h"),
    ("CKPT_SYS_STORAGE_H", "the include guard of ckpt/sys/storage.h"),
    ("CKPT_API", "the export attribute of declarations"),
    (
        "CKPT_VERSION_NUMBER",
        "the version of the headers a C program compiles against; the binding compiles no header, and \
         ckpt::version_number() gives the loaded library's",
    ),
    ("CKPT_OPTIONS_INIT", "an initializer; the safe API fills the struct with ckpt_options_init"),
    ("CKPT_NPZ_OPTIONS_INIT", "the initializer's earlier name"),
    ("CKPT_WRITER_OPTIONS_INIT", "an initializer; the safe API fills the struct with ckpt_writer_options_init"),
    ("CKPT_MANAGER_OPTIONS_INIT", "an initializer; the safe API fills the struct with ckpt_manager_options_init"),
];

/// The installed ckpt.h this run checks against.
pub fn header_path() -> PathBuf {
    if let Some(path) = std::env::var_os("CKPT_HEADER") {
        return PathBuf::from(path);
    }
    let out = std::process::Command::new("pkg-config")
        .args(["--variable=includedir", "ckpt"])
        .output()
        .expect("pkg-config runs (or set CKPT_HEADER to the installed ckpt/ckpt.h)");
    assert!(out.status.success(), "pkg-config knows no ckpt: set CKPT_HEADER or PKG_CONFIG_PATH");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()).join("ckpt/ckpt.h")
}

/// ckpt.h with the `ckpt/sys/` headers it includes (installed beside it, in `sys/`) appended.
fn header() -> String {
    let path = header_path();
    let read =
        |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()));
    let mut text = read(&path);
    let sys: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("#include \"ckpt/sys/"))
        .filter_map(|rest| rest.strip_suffix('"'))
        .map(|name| name.to_string())
        .collect();
    for name in sys {
        text += &read(&path.with_file_name("sys").join(name));
    }
    text
}

/// libckpt_s3's header, installed beside ckpt.h; `None` (the check is skipped, saying so) where it is not,
/// unless the `s3` feature is on, which needs it.
fn s3_header() -> Option<String> {
    let path = header_path().with_file_name("ckpt_s3.h");
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(e) if !cfg!(feature = "s3") => {
            eprintln!("{}: {e}: ckpt was built without libckpt_s3; its binding is not checked", path.display());
            None
        }
        Err(e) => panic!("cannot read {} (the s3 feature is on): {e}", path.display()),
    }
}

fn crate_file(name: &str) -> String {
    std::fs::read_to_string(format!("{}/src/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn without_comments(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("/*") {
        out.push_str(&rest[..start]);
        rest = match rest[start..].find("*/") {
            Some(end) => &rest[start + end + 2..],
            None => "",
        };
    }
    out.push_str(rest);
    out
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The identifier that ends `text` (after trailing spaces and `*`s).
fn last_ident(text: &str) -> &str {
    let text = text.trim_end_matches(|c: char| c.is_whitespace() || c == '*' || c == ')');
    let start = text.rfind(|c: char| !is_ident_char(c)).map_or(0, |i| i + 1);
    &text[start..]
}

/// Names of the `CKPT_API` functions of the header, in order, but for those declared under an earlier name
/// (`CKPT_SAME_AS`): the binding calls the function by its name.
fn header_functions(header: &str) -> Vec<String> {
    let earlier = earlier_names(header);
    exported_functions(header, "CKPT_API ").into_iter().filter(|f| !earlier.contains(f)).collect()
}

/// Names of the functions the header declares under their names before a rename (`CKPT_SAME_AS(name)`).
fn earlier_names(header: &str) -> Vec<String> {
    without_comments(header)
        .split(';')
        .filter(|stmt| stmt.contains("CKPT_SAME_AS("))
        .filter_map(|stmt| stmt.find("CKPT_API ").map(|at| &stmt[at..]))
        .filter_map(|decl| decl.find('(').map(|paren| last_ident(&decl[..paren]).to_string()))
        .collect()
}

/// Names of the functions of the header declared with `macro` (and a space) at the start of a line, in order.
fn exported_functions(header: &str, macro_: &str) -> Vec<String> {
    without_comments(header)
        .lines()
        .filter_map(|line| line.trim().strip_prefix(macro_))
        .filter_map(|decl| decl.find('(').map(|paren| last_ident(&decl[..paren]).to_string()))
        .collect()
}

/// Names of the functions sys.rs declares.
fn sys_functions(sys: &str) -> Vec<String> {
    sys.lines()
        .filter_map(|line| line.trim().strip_prefix("pub fn "))
        .map(|rest| rest[..rest.find('(').unwrap()].to_string())
        .collect()
}

/// Integer value of a C or Rust constant's text: `-1`, `1u`, `(-1)`, `17`, `INT64_MIN` (C) or `i64::MIN` (Rust).
fn value(text: &str) -> Option<i64> {
    let text = text.trim().trim_start_matches('(').trim_end_matches(')').trim_end_matches(['u', 'U']);
    match text {
        "INT64_MIN" | "i64::MIN" => Some(i64::MIN),
        _ => text.parse().ok(),
    }
}

fn header_constants(header: &str) -> BTreeMap<String, String> {
    without_comments(header)
        .lines()
        .filter_map(|line| line.trim().strip_prefix("#define "))
        .filter_map(|rest| {
            let mut parts = rest.trim().splitn(2, char::is_whitespace);
            let name = parts.next()?.to_string();
            Some((name, parts.next().unwrap_or("").trim().to_string()))
        })
        .filter(|(name, _)| !name.contains('(')) // a function-like macro (CKPT_SAME_AS) is no constant
        .collect()
}

/// sys.rs's constants by value; one that is another's name (an alias kept for an older name) takes its value.
fn sys_constants(sys: &str) -> BTreeMap<String, i64> {
    let texts: Vec<(String, String)> = sys
        .lines()
        .filter_map(|line| line.trim().strip_prefix("pub const "))
        .map(|rest| {
            let name = rest[..rest.find(':').unwrap()].to_string();
            (name, rest[rest.find('=').unwrap() + 1..rest.find(';').unwrap()].trim().to_string())
        })
        .collect();
    let mut out = BTreeMap::new();
    for (name, text) in &texts {
        out.insert(name.clone(), value(text).unwrap_or(i64::MAX));
    }
    for (name, text) in &texts {
        if value(text).is_none() {
            let aliased = *out.get(text).unwrap_or_else(|| panic!("sys.rs: {name} = {text} is not a number"));
            out.insert(name.clone(), aliased);
        }
    }
    out
}

/// Fields of every `typedef struct X { … } X;` of the header, in order.
fn header_structs(header: &str) -> BTreeMap<String, Vec<String>> {
    let text = without_comments(header);
    let mut structs = BTreeMap::new();
    let mut rest = text.as_str();
    while let Some(start) = rest.find("typedef struct ") {
        rest = &rest[start + "typedef struct ".len()..];
        let open = rest.find(['{', ';']).unwrap();
        if &rest[open..open + 1] == ";" {
            continue; // an opaque handle
        }
        let name = rest[..open].trim().to_string();
        let close = rest.find('}').unwrap();
        let fields = rest[open + 1..close]
            .split(';')
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(|f| match f.find("(*") {
                Some(p) => f[p + 2..p + 2 + f[p + 2..].find(')').unwrap()].trim().to_string(),
                None => last_ident(f).to_string(),
            })
            .collect();
        structs.insert(name, fields);
        rest = &rest[close..];
    }
    structs
}

/// Fields of every `pub struct X { … }` of sys.rs that has public fields.
fn sys_structs(sys: &str) -> BTreeMap<String, Vec<String>> {
    let mut structs = BTreeMap::new();
    let mut current: Option<(String, Vec<String>)> = None;
    for line in sys.lines() {
        if let Some(rest) = line.strip_prefix("pub struct ") {
            current = Some((rest.trim_end_matches(['{', ' ']).to_string(), Vec::new()));
        } else if line == "}" {
            if let Some((name, fields)) = current.take() {
                if !fields.is_empty() {
                    structs.insert(name, fields);
                }
            }
        } else if let (Some((_, fields)), Some(rest)) = (current.as_mut(), line.strip_prefix("    pub ")) {
            if let Some(colon) = rest.find(':') {
                fields.push(rest[..colon].to_string());
            }
        }
    }
    structs
}

/// Types the header names by typedef: opaque handles and callback types.
fn header_typedef_names(header: &str) -> Vec<String> {
    let text = without_comments(header);
    let mut names = Vec::new();
    for stmt in text.split(';') {
        // A statement may begin with the #defines before it.
        if let Some(rest) = stmt.rfind("typedef ").map(|at| &stmt[at + "typedef ".len()..]) {
            if let Some(p) = rest.find("(*") {
                names.push(rest[p + 2..p + 2 + rest[p + 2..].find(')').unwrap()].trim().to_string());
            } else if rest.starts_with("struct ") && !rest.contains('{') {
                names.push(last_ident(rest).to_string());
            }
        }
    }
    names
}

#[test]
fn every_c_function_is_declared_in_sys_and_reached_by_the_safe_api() {
    let header = header();
    let functions = header_functions(&header);
    assert!(functions.len() > 60, "the header parse found only {functions:?}");
    // sys.rs declares the header whole, the functions' earlier names too; the safe API calls their names.
    let all = exported_functions(&header, "CKPT_API ");
    assert!(all.len() > functions.len() + 30, "the header's earlier names were not found");
    let declared = sys_functions(&crate_file("sys.rs"));
    // Every module but sys.rs: a module added later is searched without being listed here.
    let mut modules: Vec<String> = std::fs::read_dir(format!("{}/src", env!("CARGO_MANIFEST_DIR")))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".rs") && name != "sys.rs")
        .collect();
    modules.sort();
    assert!(modules.len() > 10, "src/ holds only {modules:?}");
    let safe_api: String = modules.iter().map(|f| crate_file(f)).collect();

    let undeclared: Vec<&String> = all.iter().filter(|f| !declared.contains(f)).collect();
    let unreached: Vec<&String> = functions
        .iter()
        .filter(|f| !safe_api.contains(&format!("sys::{f}(")) && !NOT_WRAPPED.iter().any(|(name, _)| name == f))
        .collect();
    let stale: Vec<&String> = declared.iter().filter(|f| !all.contains(f)).collect();
    let needless: Vec<&str> = NOT_WRAPPED
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| !functions.iter().any(|f| f == name) || safe_api.contains(&format!("sys::{name}(")))
        .collect();
    assert!(
        undeclared.is_empty() && unreached.is_empty() && stale.is_empty() && needless.is_empty(),
        "\nnot declared in src/sys.rs: {undeclared:?}\nnot reached by the safe API (nor listed in NOT_WRAPPED): \
         {unreached:?}\ndeclared in sys.rs but not in the header: {stale:?}\nin NOT_WRAPPED but reached, or not \
         in the header: {needless:?}\n"
    );
}

#[test]
fn every_constant_of_the_header_is_declared_with_its_value() {
    let header = header_constants(&header());
    let sys = sys_constants(&crate_file("sys.rs"));
    let mut wrong = Vec::new();
    for (name, text) in &header {
        if NOT_CONSTANTS.iter().any(|(n, _)| n == name) {
            continue;
        }
        // An alias (an older name kept) has the value of the constant it names.
        let text = header.get(text).unwrap_or(text);
        let want = value(text).unwrap_or_else(|| panic!("ckpt.h: {name} = {text} is not a number"));
        match sys.get(name) {
            Some(&got) if got == want => {}
            Some(&got) => wrong.push(format!("{name} is {got} in sys.rs, {want} in ckpt.h")),
            None => wrong.push(format!("{name} ({want}) is missing from sys.rs")),
        }
    }
    for name in sys.keys() {
        if !header.contains_key(name) {
            wrong.push(format!("{name} is in sys.rs but not in ckpt.h"));
        }
    }
    assert!(header.len() > 50, "the header parse found only {header:?}");
    assert!(wrong.is_empty(), "\n{}\n", wrong.join("\n"));
}

#[test]
fn every_struct_has_the_header_fields_in_order() {
    let header = header();
    let want = header_structs(&header);
    let got = sys_structs(&crate_file("sys.rs"));
    assert_eq!(
        want.keys().collect::<Vec<_>>(),
        vec![
            "ckpt_comm_ops",
            "ckpt_file_info",
            "ckpt_manager_options",
            "ckpt_options",
            "ckpt_storage_ops",
            "ckpt_writer_options"
        ]
    );
    assert_eq!(got, want);

    let sys = crate_file("sys.rs");
    let typedefs = header_typedef_names(&header);
    assert!(typedefs.len() >= 11, "the header parse found only {typedefs:?}");
    let missing: Vec<&String> = typedefs
        .iter()
        .filter(|t| !sys.contains(&format!("pub struct {t} {{")) && !sys.contains(&format!("pub type {t} =")))
        .collect();
    assert!(missing.is_empty(), "types of ckpt.h missing from sys.rs: {missing:?}");
}

#[test]
fn every_s3_function_is_declared_in_sys_s3_and_reached_by_the_s3_feature() {
    let header = match s3_header() {
        Some(header) => header,
        None => return,
    };
    let functions = exported_functions(&header, "CKPT_S3_API ");
    assert!(functions.len() >= 3, "the ckpt_s3.h parse found only {functions:?}");
    let declared = sys_functions(&crate_file("sys/s3.rs"));
    let safe_api = crate_file("s3.rs");
    let undeclared: Vec<&String> = functions.iter().filter(|f| !declared.contains(f)).collect();
    let unreached: Vec<&String> = functions.iter().filter(|f| !safe_api.contains(&format!("sys::s3::{f}("))).collect();
    let stale: Vec<&String> = declared.iter().filter(|f| !functions.contains(f)).collect();
    assert!(
        undeclared.is_empty() && unreached.is_empty() && stale.is_empty(),
        "\nnot declared in src/sys/s3.rs: {undeclared:?}\nnot reached by src/s3.rs: {unreached:?}\ndeclared in \
         sys/s3.rs but not in ckpt_s3.h: {stale:?}\n"
    );
}

#[test]
fn every_constant_and_field_of_ckpt_s3_h_is_declared() {
    let header = match s3_header() {
        Some(header) => header,
        None => return,
    };
    let sys = crate_file("sys/s3.rs");
    let want = header_constants(&header);
    let got = sys_constants(&sys);
    let mut wrong = Vec::new();
    for (name, text) in &want {
        if NOT_S3_CONSTANTS.iter().any(|(n, _)| n == name) {
            continue;
        }
        let value = value(text).unwrap_or_else(|| panic!("ckpt_s3.h: {name} = {text} is not a number"));
        match got.get(name) {
            Some(&v) if v == value => {}
            Some(&v) => wrong.push(format!("{name} is {v} in sys/s3.rs, {value} in ckpt_s3.h")),
            None => wrong.push(format!("{name} ({value}) is missing from sys/s3.rs")),
        }
    }
    for name in got.keys() {
        if !want.contains_key(name) {
            wrong.push(format!("{name} is in sys/s3.rs but not in ckpt_s3.h"));
        }
    }
    assert!(got.len() >= 4, "the sys/s3.rs parse found only {got:?}");
    assert!(wrong.is_empty(), "\n{}\n", wrong.join("\n"));

    let structs = header_structs(&header);
    assert_eq!(structs.keys().collect::<Vec<_>>(), vec!["ckpt_s3_options"]);
    assert_eq!(sys_structs(&sys), structs);
}

/// The checks above see what they are meant to: a function, constant or field that ckpt_s3.h gains.
#[test]
fn the_s3_checks_notice_what_the_header_gains() {
    let header = match s3_header() {
        Some(header) => header,
        None => return,
    };
    let grown = header.replace(
        "#ifdef __cplusplus\n}",
        "/* CKPT_S3_API int ckpt_in_a_comment(void); */\nCKPT_S3_API int ckpt_s3_future(ckpt_storage **out,\n    \
         const char *url);\nCKPT_API int ckpt_not_s3(void);\n#define CKPT_S3_FUTURE 7u\n#ifdef __cplusplus\n}",
    );
    assert_ne!(grown, header, "the header edit applied");
    let functions = exported_functions(&grown, "CKPT_S3_API ");
    let declared = sys_functions(&crate_file("sys/s3.rs"));
    let new: Vec<&String> = functions.iter().filter(|f| !declared.contains(f)).collect();
    assert_eq!(new, vec!["ckpt_s3_future"]);
    let constants = header_constants(&grown);
    assert_eq!(constants.get("CKPT_S3_FUTURE").map(String::as_str), Some("7u"));
    assert!(!sys_constants(&crate_file("sys/s3.rs")).contains_key("CKPT_S3_FUTURE"));

    let wider = header.replace("    uint32_t addressing;", "    uint32_t addressing;\n    uint32_t future_field;");
    assert_ne!(wider, header, "the struct edit applied");
    assert_ne!(header_structs(&wider), sys_structs(&crate_file("sys/s3.rs")));
}
