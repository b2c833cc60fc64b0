//! Fuzzes the JSON request-body decoder of the HTTP API: any bytes decode as an object of every
//! kind users write (through `AnyObject::decode_json`) or a merge patch (`serde_json::Value`), or fail with a `DecodeError` value; decoded
//! objects validate, serialise and render as YAML without a panic.

#![no_main]

use aoctl_api::decode::{self, AnyObject, DecodeError};
use aoctl_api::{GitSource, IssueSource, Kind, Project, Session};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Merge patches and server-side dry runs decode to a plain value first.
    if let Err(e) = decode::decode_json::<serde_json::Value>(data) {
        check_error(&e);
    }
    for kind in Kind::ALL {
        match AnyObject::decode_json(kind, data) {
            Some(Ok(object)) => exercise(object),
            Some(Err(e)) => check_error(&e),
            None => {}
        }
    }
    if let Err(e) = decode::decode_json_valid::<Project>(data) {
        check_error(&e);
    }
    if let Err(e) = decode::decode_json_valid::<Session>(data) {
        check_error(&e);
    }
});

fn exercise(object: AnyObject) {
    let _ = object.validate();
    let value = object.to_value();
    match &object {
        AnyObject::Project(p) => {
            let _ = decode::to_yaml(p);
            let _ = decode::from_value::<Project>(value);
        }
        AnyObject::Session(s) => {
            let _ = decode::to_yaml(s);
            let _ = decode::from_value::<Session>(value);
        }
        AnyObject::GitSource(g) => {
            let _ = decode::to_yaml(g);
            let _ = decode::from_value::<GitSource>(value);
        }
        AnyObject::IssueSource(i) => {
            let _ = decode::to_yaml(i);
            let _ = decode::from_value::<IssueSource>(value);
        }
    }
}

fn check_error(e: &DecodeError) {
    assert_eq!(e.source, "request body");
    let _ = e.to_string();
}
