//! The contract suite of every store backend, against one three-member cluster, each rule with
//! a store under a prefix of its own. The rules run one after another: some of them count on
//! the revisions of their own writes following each other.

use aoctl_store::contract::{self, Backend};
use aoctl_store::Store;
use aoctl_store_etcd::{EtcdConfig, EtcdStore};

use crate::cluster::EtcdCluster;
use crate::config;

/// Fresh stores on one cluster, each under a new prefix.
struct Etcd {
    endpoints: Vec<String>,
}

impl Backend for Etcd {
    fn store(&mut self, retain: u64) -> Store {
        let config = EtcdConfig { retention: retain, ..config(self.endpoints.clone()) };
        let connect = EtcdStore::connect(config);
        let etcd = tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(connect));
        Store::new(etcd.expect("the store connects"))
    }
}

macro_rules! run {
    ($backend:expr, $($rule:ident),* $(,)?) => {
        $(
            eprintln!("contract: {}", stringify!($rule));
            contract::$rule($backend).await;
        )*
    };
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_contract_holds_on_a_three_member_cluster() {
    let cluster = EtcdCluster::start(3);
    let backend = &mut Etcd { endpoints: cluster.endpoints() };
    run!(
        backend,
        create_get_update_with_preconditions,
        stale_versions_conflict,
        status_writes_do_not_touch_spec,
        finalizer_writes_touch_only_finalizers,
        deletion_waits_for_the_last_finalizer,
        watch_from_a_version,
        lists_select_and_dry_runs_store_nothing,
        batches_are_all_or_nothing,
        too_old_versions_are_gone,
    );
}
