// SPDX-License-Identifier: Apache-2.0
//! Nested state read from Rust (`Tree`): the structure record of docs/format.md, walked, searched by path, checked
//! against the file's arrays, and refused when damaged. The record Python writes for real training state is read in
//! tests/cross (cross_test.py's nested-state check).
use ckpt::{Code, Key, Node, Reader, Tree, Vars, TREE_KEY};

use crate::common::TempDir;

// docs/format.md's example: {"w": w, "opt": {0: (0.5, None)}, "l": [v]}
const FORMAT_EXAMPLE: &str = concat!(
    r#"{"dict":[["w",{"array":"w"}],["opt",{"dict":[[0,{"tuple":[{"float":"0.5"},null]}]]}],"#,
    r#"["l",{"list":[{"array":"l/0"}]}]]}"#
);

fn listing(tree: &Tree) -> Vec<String> {
    let mut out = Vec::new();
    tree.walk(|path, node| out.push(format!("{path} {} {}", node.kind_name(), node.member().unwrap_or(""))));
    out
}

fn format_error(record: &str) -> String {
    match Tree::parse(record, "x.npz") {
        Ok(_) => panic!("the record was accepted: {record}"),
        Err(e) => {
            assert_eq!(e.code(), Code::Format);
            e.message().to_string()
        }
    }
}

#[test]
fn the_documented_example_walks_as_the_structure_it_records() {
    let tree = Tree::parse(FORMAT_EXAMPLE, "x.npz").unwrap();
    assert_eq!(
        listing(&tree),
        [
            " dict ",
            "w array w",
            "opt dict ",
            "opt/0 tuple ",
            "opt/0/0 float ",
            "opt/0/1 None ",
            "l list ",
            "l/0 array l/0"
        ]
    );
    match tree.root() {
        Node::Dict(entries) => {
            assert_eq!(entries.len(), 3);
            assert_eq!(entries[1].0, Key::Str("opt".into()));
            assert_eq!(entries[1].1, Node::Dict(vec![(Key::Int(0), Node::Tuple(vec![Node::Float(0.5), Node::None]))]));
        }
        other => panic!("the root is {other:?}"),
    }
    assert_eq!(tree.members(), ["w", "l/0"]);
    assert_eq!(tree.find("l/0").and_then(Node::member), Some("l/0"));
    assert_eq!(tree.find("opt/0/0").and_then(Node::as_f64), Some(0.5));
    assert_eq!(tree.find(""), Some(tree.root()));
    for missing in ["opt/1", "l/00", "l/1", "w/0", "l/-0", "l/+0"] {
        assert_eq!(tree.find(missing), None, "{missing}");
    }
}

#[test]
fn scalars_keep_their_type_and_exact_value() {
    let tree = Tree::parse(
        concat!(
            r#"{"dict":[["i",-12],["big",123456789012345678901234567890],["t",true],["f",false],"#,
            r#"["s","\u00e9t\u00e9 \ud83d\ude00\n"],["nan",{"float":"nan"}],["inf",{"float":"-inf"}],"#,
            r#"["z",{"float":"-0.0"}],["e",{"float":"1e-05"}],["bare",2.5],[-7,null],[99999999999999999999,1]]}"#
        ),
        "x.npz",
    )
    .unwrap();
    assert_eq!(tree.find("i"), Some(&Node::Int(-12)));
    assert_eq!(tree.find("big"), Some(&Node::BigInt("123456789012345678901234567890".into())));
    assert_eq!(tree.find("t").and_then(Node::as_bool), Some(true));
    assert_eq!(tree.find("f").and_then(Node::as_bool), Some(false));
    assert_eq!(tree.find("s").and_then(Node::as_str), Some("été 😀\n"));
    assert!(tree.find("nan").and_then(Node::as_f64).unwrap().is_nan());
    assert_eq!(tree.find("inf").and_then(Node::as_f64), Some(f64::NEG_INFINITY));
    assert_eq!(tree.find("z").and_then(Node::as_f64).map(f64::to_bits), Some((-0.0f64).to_bits()));
    assert_eq!(tree.find("e").and_then(Node::as_f64), Some(1e-05));
    assert_eq!(tree.find("bare").and_then(Node::as_f64), Some(2.5));
    assert_eq!(tree.find("-7"), Some(&Node::None));
    assert_eq!(tree.find("s").and_then(Node::as_i64), None);
    match tree.root() {
        Node::Dict(entries) => {
            assert_eq!(entries[10].0, Key::Int(-7));
            assert_eq!(entries[11].0, Key::BigInt("99999999999999999999".into()));
        }
        other => panic!("the root is {other:?}"),
    }
}

#[test]
fn keys_with_the_separator_and_the_escape_round_trip_through_paths() {
    assert_eq!(ckpt::tree_escape("a/b~c"), "a~1b~0c");
    assert_eq!(ckpt::tree_unescape("a~1b~0c"), "a/b~c");
    assert_eq!(ckpt::tree_unescape("~01"), "~1");
    let tree = Tree::parse(r#"{"dict":[["a/b~c",{"dict":[["~1",{"array":"a~1b~0c/~01"}]]}]]}"#, "x").unwrap();
    assert_eq!(tree.find("a~1b~0c/~01").and_then(Node::member), Some("a~1b~0c/~01"));
    let mut paths = Vec::new();
    tree.walk(|path, _| paths.push(path.to_string()));
    assert_eq!(paths, ["", "a~1b~0c", "a~1b~0c/~01"]);
}

#[test]
fn a_checkpoints_structure_is_checked_against_its_arrays() {
    let dir = TempDir::new("tree");
    let path = dir.join("nested.npz");
    let mut vars = Vars::new().unwrap();
    vars.add("w", &[2], &[1.0f32, 2.0]).unwrap();
    vars.add("l/0", &[1], &[7i64]).unwrap();
    vars.add("extra", &[1], &[3i32]).unwrap();
    vars.set_metadata(TREE_KEY, FORMAT_EXAMPLE).unwrap();
    vars.save(&path).unwrap();

    let mut reader = Reader::open(&path).unwrap();
    let tree = Tree::of(&reader, "nested.npz").unwrap();
    assert_eq!(tree.members(), ["w", "l/0", "extra"]);
    let member = tree.find("l/0").and_then(Node::member).unwrap().to_string();
    assert_eq!(reader.read::<i64>(&member).unwrap(), [7]);
    assert_eq!(Tree::of_vars(&Vars::read(&path).unwrap(), "nested.npz").unwrap(), tree);

    // A file saved flat is a dict of its arrays.
    let flat = dir.join("flat.npz");
    let mut vars = Vars::new().unwrap();
    vars.add("a", &[1], &[1.0f64]).unwrap();
    vars.add("b/c", &[1], &[2.0f64]).unwrap();
    vars.save(&flat).unwrap();
    assert_eq!(
        listing(&Tree::of(&Reader::open(&flat).unwrap(), "flat.npz").unwrap()),
        [" dict ", "a array a", "b~1c array b/c"]
    );

    // A record naming an array the file does not have.
    let bad = dir.join("bad.npz");
    let mut vars = Vars::new().unwrap();
    vars.add("w", &[1], &[1.0f32]).unwrap();
    vars.set_metadata(TREE_KEY, FORMAT_EXAMPLE).unwrap();
    vars.save(&bad).unwrap();
    let e = Tree::of(&Reader::open(&bad).unwrap(), "bad.npz").unwrap_err();
    assert_eq!(e.code(), Code::Format);
    assert_eq!(e.message(), "bad.npz: its __ckpt_tree__ names the array \"l/0\", which the file does not have");
}

#[test]
fn a_damaged_record_is_a_format_error_naming_the_file_and_the_fault() {
    assert_eq!(format_error("{"), "x.npz: its __ckpt_tree__ is cut short: '\"' expected (at byte 1)");
    assert_eq!(
        format_error(r#"{"dict":[["a" 1]]}"#),
        "x.npz: its __ckpt_tree__ is not JSON of the documented shape: ',' expected (at byte 14)"
    );
    assert_eq!(format_error(r#"{"list":[]}"#), "x.npz: its __ckpt_tree__ does not describe a dict (at byte 11)");
    for (record, fault) in [
        (r#"{"dict":[["a",{"set":[]}]]}"#, "of the unknown kind \"set\""),
        (r#"{"dict":[[true,1]]}"#, "not a [str or int key, value] pair"),
        (r#"{"dict":[[1.5,1]]}"#, "a number but not an int"),
        (r#"{"dict":[["a",{"float":"x1"}]]}"#, "a float that is not one: \"x1\""),
        (r#"{"dict":[["a",{"array":"w","list":[]}]]}"#, "more than its kind"),
        (r#"{"dict":[]} x"#, "text after its end"),
        (r#"{"dict":[["a","\ud800"]]}"#, "lone high surrogate"),
        (r#"{"dict":[["a",01]]}"#, "malformed number"),
        (r#"{"dict":[["a",[1]]]}"#, "none of the documented kinds"),
    ] {
        let message = format_error(record);
        assert!(message.contains(fault), "{record}: {message}");
    }
    let mut deep = String::from(r#"{"dict":[["a","#);
    for _ in 0..100_000 {
        deep.push_str(r#"{"list":["#);
    }
    assert!(format_error(&deep).contains("nested more than 256 levels deep"));
    for n in 0..FORMAT_EXAMPLE.len() {
        assert!(!format_error(&FORMAT_EXAMPLE[..n]).is_empty());
    }
}
