// Licensed under the Apache License, Version 2.0.

/// What storing several versions of one object in turn, in one transaction, gives: for each, whether it is the
/// newest copy the cache knows once it is stored (``CacheStore/storeNow(_:)``'s answer), and which one the cache
/// holds at the end, so that only that one is written.
///
/// The rules are those of one store at a time: a version is written when the cache holds none of the object or
/// an older one, unless the cache evicted a higher version of it (then it is not the newest, and not written); a
/// version not written is the newest only when the cache holds that same version. (Once one is written, the cache
/// holds a version at least the evicted one, so the evicted bound refuses nothing more.)
struct BatchStoreOutcome: Equatable {
    /// For each version, in the order given: whether it is then the newest copy known.
    var newest: [Bool]
    /// The index of the version the cache holds at the end, if any was written.
    var written: Int?

    /// - Parameters:
    ///   - versions: the object's versions, in the order the events came.
    ///   - held: the version the cache holds before the first (`nil`: none).
    ///   - evicted: the version the cache evicted and remembers (`nil`: none).
    init(versions: [Int64], held: Int64?, evicted: Int64?) {
        var held = held
        newest = []
        newest.reserveCapacity(versions.count)
        written = nil
        for (index, version) in versions.enumerated() {
            if let evicted, version < evicted {
                newest.append(false)
            } else if held.map({ version > $0 }) ?? true {
                newest.append(true)
                held = version
                written = index
            } else {
                newest.append(held == version)
            }
        }
    }
}
