//! The sled store against the contract of every store backend.

use super::*;
use crate::contract::{self, Backend};

/// Fresh sled stores, each in a temporary directory kept until the test ends.
#[derive(Default)]
struct Sled {
    dirs: Vec<tempfile::TempDir>,
}

impl Backend for Sled {
    fn store(&mut self, retain: u64) -> Store {
        let dir = tmp();
        let store = open_with(dir.path(), StoreConfig { log_retention: retain, ..StoreConfig::default() });
        self.dirs.push(dir);
        store
    }
}

macro_rules! contract_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                contract::$name(&mut Sled::default()).await;
            }
        )*
    };
}

contract_tests!(
    create_get_update_with_preconditions,
    stale_versions_conflict,
    status_writes_do_not_touch_spec,
    finalizer_writes_touch_only_finalizers,
    deletion_waits_for_the_last_finalizer,
    watch_from_a_version,
    too_old_versions_are_gone,
    lists_select_and_dry_runs_store_nothing,
    batches_are_all_or_nothing,
);
