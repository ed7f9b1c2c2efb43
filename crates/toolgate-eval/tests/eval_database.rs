//! The eval's own PostgreSQL database on a real server (the test process's cluster): created
//! beside the database the URL names, holding a filled store, and gone afterwards, whether the
//! eval removes it or drops it on an error path; a URL that is not `postgres://` is refused.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use toolgate_eval::eval_database::{EvalDatabase, EvalDatabaseError, store_connection};
use toolgate_store::postgres::cluster;
use toolgate_wiring::StoreKind;

async fn exists(server: &str, name: &str) -> bool {
    let (client, connection) = tokio_postgres::connect(server, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .query_one(
            "SELECT count(*) FROM pg_database WHERE datname = $1",
            &[&name],
        )
        .await
        .unwrap()
        .get::<_, i64>(0)
        == 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_exists_while_the_eval_runs_and_is_gone_after_either_way() {
    let server = cluster::shared().unwrap().url();

    let removed = EvalDatabase::create(&server).await.unwrap();
    let name = removed.name().to_owned();
    let store = removed.open_store(StoreKind::Notes).await.unwrap();
    let notes = store_connection(&store)
        .with_sql(|s| Ok(s.query_i64("SELECT count(*) FROM notes", &[])))
        .unwrap()
        .unwrap();
    assert!(notes > 0, "the store holds the sample notebook");
    assert!(exists(&server, &name).await);
    removed.remove().await.unwrap();
    assert!(
        !exists(&server, &name).await,
        "removed with its store still open"
    );

    // An eval that ends on an error drops the value without removing it.
    let dropped = EvalDatabase::create(&server).await.unwrap();
    let name = dropped.name().to_owned();
    let store = dropped.open_store(StoreKind::Books).await.unwrap();
    assert!(exists(&server, &name).await);
    drop(store);
    drop(dropped);
    assert!(!exists(&server, &name).await, "dropped on the error path");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_that_is_not_postgres_is_refused() {
    let port = cluster::shared().unwrap().port();
    let refused = EvalDatabase::create(&format!("host=127.0.0.1 port={port} dbname=toolgate"))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, EvalDatabaseError::BadUrl { .. }),
        "{refused}"
    );
}
