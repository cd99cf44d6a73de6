// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveJSON
import Synchronization

/// The counts of filtered queries, kept between writes to their collection. A page of a filtered query carries
/// the count of its whole result, and counting reads every match (33,333 index entries for a third of 100,000
/// objects: most of a page's time), while the pages of one result, read through its cursors, count the same
/// objects again and again.
///
/// A count is kept with a sequence number of the event log read in the snapshot that counted: the collection's
/// last one on SQLite (an index search on `event_by_collection`), the log's last one on PostgreSQL (whose planner
/// may read a collection's `max(seq)` backward along the primary key, through every later event). A later
/// snapshot in which that number is the same holds the same objects of the collection, so the same count: every
/// write of an object appends its event, in the same transaction, and sequence numbers follow commit order; the
/// log is only ever pruned from its oldest event, so a write after the count either is still the collection's
/// (the log's) last event or, pruned, took every earlier event of the collection with it. With no such event
/// (`nil`: a collection never written, or its events pruned) the query is always counted, since two states may
/// both have none. The log's last event changes with any write, so on PostgreSQL a write to another collection
/// makes the next page count again too.
///
/// Each store instance keeps its own; several instances on one PostgreSQL database each check their kept count
/// against the shared log. At most ``capacity`` counts are kept (filters are the clients' choice); beyond it
/// every count is dropped and they are kept anew.
package final class FilteredCounts: Sendable {
    package static let capacity = 1_024

    /// A filtered query's result as far as its count goes: the sort does not change it.
    package struct Key: Hashable, Sendable {
        let collection: String
        let filter: [String: JSONValue]

        package init(_ query: CollectionQuery) {
            collection = query.collection
            filter = query.where
        }
    }

    private struct Kept: Sendable {
        let seq: Int64
        let count: Int
    }

    private let kept = Mutex<[Key: Kept]>([:])

    package init() {}

    /// The count kept for `key`, if it holds in a snapshot where the event it was kept at is `seq`.
    package func count(of key: Key, at seq: Int64?) -> Int? {
        guard let seq else { return nil }
        return kept.withLock { kept in kept[key].flatMap { $0.seq == seq ? $0.count : nil } }
    }

    /// The count kept for `key` with the sequence number it was kept at, if any (for a store that checks it in
    /// the statement that would count: ``count(of:at:)`` there).
    package func kept(for key: Key) -> (seq: Int64, count: Int)? {
        kept.withLock { kept in kept[key].map { ($0.seq, $0.count) } }
    }

    /// Keeps `count`, read in a snapshot where the event that dates it is `seq` (nothing is kept without one).
    package func keep(_ count: Int, of key: Key, at seq: Int64?) {
        guard let seq else { return }
        kept.withLock { kept in
            if kept[key] == nil, kept.count >= Self.capacity { kept.removeAll(keepingCapacity: true) }
            kept[key] = Kept(seq: seq, count: count)
        }
    }
}
