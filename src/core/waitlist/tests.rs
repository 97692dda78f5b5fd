//! The wait list's unit tests.

use super::*;

use super::lock_in_db0 as lock;

fn waiter(key: &str, owner: &str) -> Waiter<()> {
    Waiter {
        lock: lock(key),
        more_locks: Vec::new(),
        wants: Wants::Hold,
        owner: owner.as_bytes().to_vec(),
        options: AcquireOptions::default(),
        client: 1,
        deadline: 0,
        since_us: 0,
        handle: (),
    }
}

#[test]
fn waiters_are_served_in_arrival_order_per_lock() {
    let mut list = WaitList::default();
    let a = list.push(waiter("k", "a"));
    let other = list.push(waiter("j", "x"));
    let b = list.push(waiter("k", "b"));
    assert_eq!(list.head(&lock("k")).map(|(id, _)| id), Some(a));
    list.remove(a);
    assert_eq!(
        list.head(&lock("k")).map(|(id, w)| (id, w.owner.clone())),
        Some((b, b"b".to_vec()))
    );
    assert_eq!(list.head(&lock("j")).map(|(id, _)| id), Some(other));
    assert_eq!(list.oldest().map(|w| w.owner.clone()), Some(b"x".to_vec()));
    assert_eq!(list.line(&lock("k")).count(), 1);
    assert_eq!(list.waiting_on(&lock("k")), 1);
    assert_eq!(list.find_owner(&lock("k"), b"b").map(|(id, _)| id), Some(b));
    assert!(list.find_owner(&lock("k"), b"a").is_none());
    assert!(list.find_owner(&lock("j"), b"b").is_none());
}

#[test]
fn leaving_from_mid_line_keeps_the_rest_in_order() {
    let mut list = WaitList::default();
    let ids: Vec<_> = (0..5)
        .map(|i| list.push(waiter("k", &i.to_string())))
        .collect();
    list.remove(ids[2]);
    let mut served = Vec::new();
    while let Some((id, _)) = list.head(&lock("k")) {
        served.push(id);
        list.remove(id);
    }
    assert_eq!(served, vec![ids[0], ids[1], ids[3], ids[4]]);
    assert!(!list.has_waiters(&lock("k")));
    assert!(list.is_empty());
}

#[test]
fn plain_waiters_have_their_own_line() {
    let mut list = WaitList::default();
    let mut fair = waiter("k", "f");
    fair.options.fair = true;
    let f = list.push(fair);
    let p = list.push(waiter("k", "p"));
    assert_eq!(list.head(&lock("k")).map(|(id, _)| id), Some(f));
    assert_eq!(list.first_plain(&lock("k")), Some(p));
    list.remove(p);
    assert_eq!(list.first_plain(&lock("k")), None);
    assert!(list.has_waiters(&lock("k")));
}

#[test]
fn fair_waiters_and_requests_are_found() {
    let mut list = WaitList::default();
    let p = list.push(waiter("k", "p"));
    assert_eq!(list.first_fair(&lock("k")), None);
    let req = RequestId::parse(b"r").unwrap();
    let mut fair = waiter("k", "f");
    fair.options.fair = true;
    fair.options.req = Some(req);
    let f1 = list.push(fair);
    let mut again = waiter("k", "f");
    again.options.req = Some(req);
    let f2 = list.push(again);
    list.push(waiter("k", "f"));
    assert_eq!(list.first_fair(&lock("k")), Some(f1));
    assert_eq!(list.same_request(&waiter("k", "f"), &req), vec![f1, f2]);
    list.remove(f1);
    assert_eq!(list.first_fair(&lock("k")), None);
    assert_eq!(list.same_request(&waiter("k", "f"), &req), vec![f2]);
    assert_eq!(list.first_plain(&lock("k")), Some(p));
}

#[test]
fn a_multi_key_request_answers_only_the_same_locks() {
    let mut list = WaitList::default();
    let req = RequestId::parse(b"r").unwrap();
    let with = |more: &[&str]| {
        let mut w = waiter("k", "o");
        w.more_locks = more.iter().map(|k| lock(k)).collect();
        w.options.req = Some(req);
        w
    };
    let single = list.push(with(&[]));
    let both = list.push(with(&["j"]));
    let again = list.push(with(&["j"]));
    list.push(with(&["i"]));
    assert_eq!(list.same_request(&with(&["j"]), &req), vec![both, again]);
    assert_eq!(list.same_request(&with(&[]), &req), vec![single]);
}

#[test]
fn the_line_and_each_kind() {
    let mut list = WaitList::default();
    let mut fair = waiter("k", "f");
    fair.options.fair = true;
    let mut read = waiter("k", "r");
    read.options.mode = Some(RwMode::Read);
    let mut write = waiter("k", "w");
    write.options.mode = Some(RwMode::Write);
    let mut multi = waiter("k", "m");
    multi.more_locks = vec![lock("j")];
    let mut permits = waiter("k", "");
    permits.wants = Wants::Permits(2);
    let mut lease = waiter("k", "");
    lease.wants = Wants::Permits(1);
    lease.options.lease = crate::core::lease::Lease::from_ms(1000);
    let mut latch = waiter("k", "");
    latch.wants = Wants::LatchOpen;
    list.push(waiter("other", "o"));
    for w in [
        waiter("k", "l"),
        fair,
        read,
        write,
        multi,
        permits,
        lease,
        latch,
    ] {
        list.push(w);
    }
    let kinds: Vec<&str> = list.line(&lock("k")).map(Waiter::kind).collect();
    assert_eq!(
        kinds,
        ["lock", "fair", "read", "write", "multi", "permits", "lease", "latch"]
    );
    assert_eq!(list.line(&lock("j")).count(), 1);
    assert_eq!(list.line(&lock("none")).count(), 0);
}

#[test]
fn calls_for_holds_are_found_by_owner_alone() {
    let mut list = WaitList::default();
    let a1 = list.push(waiter("k", "a"));
    let mut multi = waiter("j", "a");
    multi.more_locks = vec![lock("m")];
    let a2 = list.push(multi);
    let mut permits = waiter("s", "a");
    permits.wants = Wants::Permits(1);
    list.push(permits);
    assert!(list.owner_waits(b"a") && !list.owner_waits(b"b"));
    assert_eq!(
        list.hold_calls_of(b"a"),
        vec![(a1, vec![lock("k")]), (a2, vec![lock("j"), lock("m")])]
    );
    list.remove(a1);
    list.remove(a2);
    assert!(!list.owner_waits(b"a"));
    assert!(list.hold_calls_of(b"a").is_empty());
}

#[test]
fn removing_twice_is_harmless() {
    let mut list = WaitList::default();
    let id = list.push(waiter("k", "a"));
    assert!(list.remove(id).is_some());
    assert!(list.remove(id).is_none());
    assert_eq!(list.locks_in(None), Vec::<LockId>::new());
}

#[test]
fn locks_by_database_and_drain() {
    let mut list = WaitList::default();
    list.push(waiter("k", "a"));
    let mut other_db = waiter("k", "b");
    other_db.lock.db = 3;
    list.push(other_db);
    assert_eq!(list.locks_in(Some(3)).len(), 1);
    assert_eq!(list.locks_in(None).len(), 2);
    let drained = list.drain();
    assert_eq!(drained.len(), 2);
    assert_eq!(drained[0].owner, b"a");
    assert!(list.is_empty() && list.locks_in(None).is_empty());
}

#[test]
fn a_multi_key_waiter_stands_in_every_line_in_arrival_order() {
    let mut list = WaitList::default();
    let first = list.push(waiter("b", "s"));
    let mut multi = waiter("a", "m");
    multi.more_locks = vec![lock("b"), lock("c")];
    let m = list.push(multi);
    let later = list.push(waiter("a", "t"));
    assert_eq!(list.head(&lock("a")).map(|(id, _)| id), Some(m));
    assert_eq!(list.head(&lock("b")).map(|(id, _)| id), Some(first));
    assert_eq!(list.head(&lock("c")).map(|(id, _)| id), Some(m));
    assert!(list.get(m).is_some_and(Waiter::is_multi));
    assert_eq!(list.find_owner(&lock("c"), b"m").map(|(id, _)| id), Some(m));
    list.remove(m);
    assert_eq!(list.head(&lock("a")).map(|(id, _)| id), Some(later));
    assert!(!list.has_waiters(&lock("c")));
    assert_eq!(list.waiting_on(&lock("b")), 1);
    assert!(list.find_owner(&lock("b"), b"m").is_none());
}
