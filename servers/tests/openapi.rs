//! The committed OpenAPI documents (`openapi/*.json`) are those generated
//! from the fakes' dropshot API traits. A change to a trait or to a wire
//! type must come with the regenerated document, so that reviewers see the
//! wire change; regenerate with
//!
//! ```text
//! RACKSIM_UPDATE_OPENAPI=1 cargo test -p racksim-servers --test integration -- openapi::
//! ```

use std::path::PathBuf;

use racksim_servers::{dpd_openapi, mgs_openapi, sled_agent_openapi};

const UPDATE_VAR: &str = "RACKSIM_UPDATE_OPENAPI";

fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../openapi")
        .join(name)
}

fn check(name: &str, generated: serde_json::Value) {
    let text = serde_json::to_string_pretty(&generated).unwrap() + "\n";
    let file = path(name);
    if std::env::var_os(UPDATE_VAR).is_some() {
        std::fs::write(&file, &text).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(
        committed == text,
        "openapi/{name} is not the document generated from the code: the API or a wire type \
         changed. Regenerate it with `{UPDATE_VAR}=1 cargo test -p racksim-servers --test integration -- openapi::` \
         and commit the difference."
    );
}

#[test]
fn committed_documents_match_the_api_traits() {
    check("dpd.json", dpd_openapi());
    check("mgs.json", mgs_openapi());
    check("sled-agent.json", sled_agent_openapi());
}
