//! The query parameters of the resource endpoints, shared by the handlers and the watch streams.

use aoctl_api::selector::{FieldSelector, Selector};
use aoctl_store::WriteOptions;

use super::AppError;

/// Query parameters the resource endpoints understand.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Params {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub watch: Option<String>,
    pub resource_version: Option<String>,
    pub timeout_seconds: Option<u64>,
    pub dry_run: Option<String>,
    /// With a `Table` answer: what each row carries of its object (`None`, `Metadata`, `Object`).
    pub include_object: Option<String>,
}

impl Params {
    pub(super) fn options(&self) -> Result<WriteOptions, AppError> {
        match self.dry_run.as_deref() {
            None => Ok(WriteOptions { dry_run: false }),
            Some("All") => Ok(WriteOptions { dry_run: true }),
            Some(other) => Err(AppError::BadRequest(format!("dryRun: unsupported value `{other}`; allowed: All"))),
        }
    }

    pub(super) fn selector(&self) -> Result<Selector, AppError> {
        match self.label_selector.as_deref() {
            None | Some("") => Ok(Selector::everything()),
            Some(s) => Selector::parse(s).map_err(|e| AppError::BadRequest(format!("labelSelector: {e}"))),
        }
    }

    pub(super) fn fields(&self) -> Result<FieldSelector, AppError> {
        FieldSelector::parse(self.field_selector.as_deref().unwrap_or(""))
            .map_err(|e| AppError::BadRequest(format!("fieldSelector: {e}")))
    }

    pub(super) fn is_watch(&self) -> bool {
        matches!(self.watch.as_deref(), Some("true" | "1"))
    }
}
