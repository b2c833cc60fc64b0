//! Fuzzes the JSON request-body decoder of the HTTP API: any bytes decode as a `Project`, a
//! `Session` or a merge patch (`serde_json::Value`), or fail with a `DecodeError` value; decoded
//! objects validate, serialise and render as YAML without a panic.

#![no_main]

use aoctl_api::decode::{self, AnyObject, DecodeError};
use aoctl_api::{Project, Session};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Merge patches and server-side dry runs decode to a plain value first.
    if let Err(e) = decode::decode_json::<serde_json::Value>(data) {
        check_error(&e);
    }
    match decode::decode_json::<Project>(data) {
        Ok(p) => exercise(AnyObject::Project(p)),
        Err(e) => check_error(&e),
    }
    match decode::decode_json::<Session>(data) {
        Ok(s) => exercise(AnyObject::Session(s)),
        Err(e) => check_error(&e),
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
    }
}

fn check_error(e: &DecodeError) {
    assert_eq!(e.source, "request body");
    let _ = e.to_string();
}
