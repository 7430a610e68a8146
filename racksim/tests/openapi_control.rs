//! The committed OpenAPI document of live mode's control API
//! (`openapi/racksim-control.json`) is the one generated from its dropshot
//! trait. Regenerate with
//! `RACKSIM_UPDATE_OPENAPI=1 cargo test -p racksim --test integration -- openapi_control::`.

use std::path::PathBuf;

#[test]
fn committed_control_api_document_matches_the_trait() {
    let text = serde_json::to_string_pretty(&racksim::live::control_openapi()).unwrap() + "\n";
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../openapi/racksim-control.json");
    if std::env::var_os("RACKSIM_UPDATE_OPENAPI").is_some() {
        std::fs::write(&file, &text).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(
        committed == text,
        "openapi/racksim-control.json is not the document generated from the control API: \
         regenerate it with `RACKSIM_UPDATE_OPENAPI=1 cargo test -p racksim --test \
         integration -- openapi_control::` and commit the difference."
    );
}
