// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI

/// A window's pages read from the cloud one request after another, joined into one list of items.
///
/// Each request is a consistent read, but the reads are not one: an object that moved across the cursor
/// between two of them comes in both (once where it was, once where it is), or in neither. This keeps each
/// object once, the newer copy where that copy puts it; the list is then shorter than the pages read, and
/// the caller reads on until the window holds its pages. An object that moved the other way is missed here,
/// and its realtime event, later than the first read, places it (``LiveCollectionState/placesOverFetch(_:placing:seq:readAt:heldVersions:)``).
/// Pure: no I/O.
package struct WindowPagesRead {
    package let anchor: CollectionAnchor
    /// The items read so far, in the query's order, each object once.
    package private(set) var items: [Entity] = []

    package init(anchor: CollectionAnchor) { self.anchor = anchor }

    /// Joins a page read after the items held: after them from the first page, before them from the last.
    package mutating func add(_ page: [Entity]) {
        var kept = page
        if !items.isEmpty {
            let held = Dictionary(items.enumerated().map { ($0.element.id, $0.offset) }, uniquingKeysWith: { first, _ in first })
            var dropped: Set<Int> = []
            kept = page.filter { entity in
                guard let index = held[entity.id] else { return true }
                // The newer copy stays; a page is read later than the items it joins, so it is the page's
                // unless the cloud answered out of order.
                if items[index].version > entity.version { return false }
                dropped.insert(index)
                return true
            }
            if !dropped.isEmpty { items = items.enumerated().filter { !dropped.contains($0.offset) }.map(\.element) }
        }
        switch anchor {
        case .first: items += kept
        case .last: items = kept + items
        }
    }
}
