// SPDX-License-Identifier: Apache-2.0
//! The Rust side of ckpt's cross-language checkpoints (tests/cross/README.md): writes and checks the shared
//! checkpoint, directly and through a manager.
//!
//! ```text
//! cross write PATH plain|objax
//! cross check PATH
//! cross manager-save LOGDIR IDX
//! cross manager-resume LOGDIR IDX
//! cross tree PATH
//! ```
//! A failing ckpt call exits 1 with its code and message; a difference exits 1 naming it; a usage error exits 2.
use std::process::ExitCode;

use ckpt::{Bf16, Dtype, F8E4M3Fn, Key, Layout, Manager, ManagerOptions, Node, Options, Reader, Tree, Vars};

const W: [f32; 6] = [0.5, -1.0, 2.0, 3.25, -4.0, 0.001];
const STEP: i64 = 42;
const BF16: [u16; 4] = [0x3f80, 0xc000, 0x7f80, 0x0001];
const F8: [u8; 3] = [0x38, 0xb8, 0x7e];
const NOTE: &str = "été ∂";
const NAMES: [&str; 5] = ["w", "step", "bf16", "f8", "empty"];

enum Failure {
    Usage(String),
    Ckpt(ckpt::Error),
    Differs(String),
}

impl From<ckpt::Error> for Failure {
    fn from(e: ckpt::Error) -> Failure {
        Failure::Ckpt(e)
    }
}

fn differs(what: String) -> Failure {
    Failure::Differs(what)
}

/// The checkpoint, with metadata writer and note (and step, for manager saves).
fn checkpoint(step_metadata: Option<i64>) -> ckpt::Result<Vars<'static>> {
    let mut vars = Vars::new()?;
    vars.add("w", &[2, 3], &W)?;
    vars.add_scalar("step", STEP)?;
    vars.add("bf16", &[4], &BF16.map(Bf16))?;
    vars.add("f8", &[3], &F8.map(F8E4M3Fn))?;
    vars.add::<i32>("empty", &[0, 2], &[])?;
    vars.set_metadata("writer", "rust")?;
    vars.set_metadata("note", NOTE)?;
    if let Some(idx) = step_metadata {
        vars.set_metadata("step", &idx.to_string())?;
    }
    Ok(vars)
}

/// Checks names, dtypes, shapes, values bit for bit and the note; returns the writer.
fn check(vars: &Vars<'_>) -> Result<String, Failure> {
    let names: Vec<&str> = vars.names().collect();
    if names != NAMES {
        return Err(differs(format!("names are {names:?}, not {NAMES:?}")));
    }
    let expect = [
        ("w", Dtype::Float32, &[2i64, 3][..]),
        ("step", Dtype::Int64, &[][..]),
        ("bf16", Dtype::Bfloat16, &[4][..]),
        ("f8", Dtype::Float8E4M3Fn, &[3][..]),
        ("empty", Dtype::Int32, &[0, 2][..]),
    ];
    for (name, dtype, shape) in expect {
        let got = vars.dtype(name)?;
        if got != dtype {
            return Err(differs(format!("'{name}' is {got}, not {dtype}")));
        }
        let got = vars.shape(name)?;
        if got != shape {
            return Err(differs(format!("'{name}' has shape {got:?}, not {shape:?}")));
        }
    }
    let w: Vec<u32> = vars.get::<f32>("w")?.iter().map(|x| x.to_bits()).collect();
    if w != W.map(f32::to_bits) {
        return Err(differs(format!("'w' holds {:?}, not {W:?}", vars.get::<f32>("w")?)));
    }
    if vars.get::<i64>("step")? != [STEP] {
        return Err(differs(format!("'step' holds {:?}, not {STEP}", vars.get::<i64>("step")?)));
    }
    let bf16: Vec<u16> = vars.get::<Bf16>("bf16")?.iter().map(|b| b.0).collect();
    if bf16 != BF16 {
        return Err(differs(format!("'bf16' holds {bf16:04x?}, not {BF16:04x?}")));
    }
    let f8: Vec<u8> = vars.get::<F8E4M3Fn>("f8")?.iter().map(|b| b.0).collect();
    if f8 != F8 {
        return Err(differs(format!("'f8' holds {f8:02x?}, not {F8:02x?}")));
    }
    if !vars.get::<i32>("empty")?.is_empty() {
        return Err(differs("'empty' is not empty".to_string()));
    }
    match vars.metadata("note") {
        Some(NOTE) => {}
        other => return Err(differs(format!("metadata 'note' is {other:?}, not {NOTE:?}"))),
    }
    vars.metadata("writer").map(String::from).ok_or_else(|| differs("no metadata 'writer'".to_string()))
}

fn index(arg: &str) -> Result<i64, Failure> {
    arg.parse::<i64>().ok().filter(|i| *i >= 0).ok_or_else(|| Failure::Usage(format!("'{arg}' is not an index")))
}

/// UTF-8 bytes in hex; "." for none.
fn hex(text: &str) -> String {
    if text.is_empty() {
        return ".".to_string();
    }
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

/// One line per node of the checkpoint's structure (tests/cross/README.md): path, how it is reached, kind, value.
fn print_tree(path: &str, node: &Node, reached: &str, reader: &Reader) -> Result<(), Failure> {
    let value = match node {
        Node::Dict(entries) => entries.len().to_string(),
        Node::List(items) | Node::Tuple(items) => items.len().to_string(),
        Node::Array(member) => {
            let dims: Vec<String> = reader.shape(member)?.iter().map(i64::to_string).collect();
            format!("{} [{}]", hex(member), dims.join(","))
        }
        Node::Float(f) => format!("{:016x}", f.to_bits()),
        Node::Int(i) => i.to_string(),
        Node::BigInt(digits) => digits.clone(),
        Node::Bool(b) => b.to_string(),
        Node::Str(s) => hex(s),
        Node::None => "-".to_string(),
    };
    println!("{} {} {} {}", hex(path), reached, node.kind_name(), value);
    let prefix = if path.is_empty() { String::new() } else { format!("{path}/") };
    match node {
        Node::Dict(entries) => {
            for (key, child) in entries {
                let reached = if matches!(key, Key::Str(_)) { "str" } else { "int" };
                print_tree(&format!("{prefix}{}", ckpt::tree_escape(&key.text())), child, reached, reader)?;
            }
        }
        Node::List(items) | Node::Tuple(items) => {
            for (i, child) in items.iter().enumerate() {
                print_tree(&format!("{prefix}{i}"), child, "item", reader)?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn run(args: &[String]) -> Result<(), Failure> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["write", path, layout] => {
            let layout = match *layout {
                "plain" => Layout::Plain,
                "objax" => Layout::Objax,
                other => return Err(Failure::Usage(format!("layout '{other}' is neither plain nor objax"))),
            };
            checkpoint(None)?.save_with(path, &Options::new().layout(layout))?;
        }
        ["check", path] => {
            println!("ok {}", check(&Vars::read(path)?)?);
        }
        ["tree", path] => {
            let reader = Reader::open(path)?;
            print_tree("", Tree::of(&reader, path)?.root(), "root", &reader)?;
        }
        ["manager-save", logdir, idx] => {
            let idx = index(idx)?;
            let mut manager = Manager::open(logdir, &ManagerOptions::new().keep(3))?;
            manager.save(&checkpoint(Some(idx))?, idx)?;
            manager.close()?;
        }
        ["manager-resume", logdir, idx] => {
            let idx = index(idx)?;
            let mut manager = Manager::open(logdir, &ManagerOptions::new().keep(3))?;
            // Zero-filled arrays of the checkpoint's names, dtypes and shapes, restored into in place.
            let (mut w, mut step, mut bf16, mut f8, mut empty) =
                ([0f32; 6], [0i64], [Bf16(0); 4], [F8E4M3Fn(0); 3], [0i32; 0]);
            let mut vars = Vars::new()?;
            vars.add_borrowed("w", &[2, 3], &mut w)?;
            vars.add_borrowed("step", &[], &mut step)?;
            vars.add_borrowed("bf16", &[4], &mut bf16)?;
            vars.add_borrowed("f8", &[3], &mut f8)?;
            vars.add_borrowed("empty", &[0, 2], &mut empty)?;
            let restored = manager.restore(&mut vars, None)?;
            if restored != idx {
                return Err(differs(format!("restored checkpoint {restored}, not {idx}")));
            }
            let writer = check(&vars)?;
            let step_metadata = idx.to_string();
            if vars.metadata("step") != Some(step_metadata.as_str()) {
                return Err(differs(format!("metadata 'step' is {:?}, not {step_metadata:?}", vars.metadata("step"))));
            }
            manager.close()?;
            println!("ok {writer}");
        }
        _ => return Err(Failure::Usage(
            "usage: cross write PATH plain|objax | check PATH | manager-save LOGDIR IDX | manager-resume LOGDIR IDX | \
             tree PATH"
                .to_string(),
        )),
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(message)) => {
            eprintln!("cross: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Ckpt(e)) => {
            eprintln!("cross: ckpt error {} ({}): {}", e.code().raw(), e.code(), e.message());
            ExitCode::FAILURE
        }
        Err(Failure::Differs(what)) => {
            eprintln!("cross: {what}");
            ExitCode::FAILURE
        }
    }
}
