//! Fuzzes the manifest decoder `aoctl apply` runs on every file it reads: any text either decodes
//! into valid objects or fails with a `DecodeError` value, never a panic. What it accepts must also
//! pass the server's JSON decoder and validation, since that is what `aoctl apply` sends.

#![no_main]

use aoctl_api::decode::{self, AnyObject};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The CLI reads files with `read_to_string`; lossy conversion keeps every input useful.
    let text = String::from_utf8_lossy(data);
    let docs = decode::split_documents(&text);
    for (line, _) in &docs {
        assert!(*line >= 1, "document lines are 1-based");
    }
    match decode::decode_manifests("fuzz.yaml", &text) {
        Ok(decoded) => {
            assert!(decoded.len() <= docs.len(), "more objects than documents");
            for d in decoded {
                server_accepts(&d.object);
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
    // The locator runs on field paths serde reports; give it any path too.
    if let Some(path) = text.lines().next() {
        let _ = decode::locate_nearest(&text, path);
    }
});

/// The JSON body `aoctl apply` builds from a decoded object decodes on the server and validates.
fn server_accepts(object: &AnyObject) {
    let body = serde_json::to_vec(&object.to_value()).expect("an object's JSON serialises");
    let decoded = AnyObject::decode_json(object.kind(), &body)
        .unwrap_or_else(|| panic!("decode_manifests returned a {:?}", object.kind()))
        .unwrap_or_else(|e| panic!("server rejects {object:?}: {e}"));
    let _ = decode::to_yaml(&decoded.to_value());
    let errors = decoded.validate();
    assert!(errors.is_empty(), "valid in YAML but not as JSON: {errors:?} for {object:?}");
}
