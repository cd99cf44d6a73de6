// Licensed under the Apache License, Version 2.0.

/// Sets an observable property only when its value changes: an `@Observable` model tells its observers of every
/// assignment, and a notification that leaves a property as it was must not make views depending on it redraw.
@MainActor
func setIfChanged<Root: AnyObject, Value: Equatable>(_ root: Root, _ keyPath: ReferenceWritableKeyPath<Root, Value>, _ value: Value) {
    if root[keyPath: keyPath] != value { root[keyPath: keyPath] = value }
}

extension LiveGateError {
    /// `error` as a model's `error` property holds it: as it is when it is one, else described (`code` nil).
    static func describing(_ error: any Error) -> LiveGateError {
        error as? LiveGateError ?? LiveGateError(code: nil, message: "\(error)")
    }

    /// Whether two errors say the same (errors are compared by what they tell a person and a program).
    func says(_ other: LiveGateError?) -> Bool {
        guard let other else { return false }
        return code == other.code && message == other.message && kind == other.kind
    }
}

/// An error property of a model: set only when it says something else.
@MainActor
func setIfChanged<Root: AnyObject>(_ root: Root, _ keyPath: ReferenceWritableKeyPath<Root, LiveGateError?>, _ value: LiveGateError?) {
    let current = root[keyPath: keyPath]
    let same = current.map { $0.says(value) } ?? (value == nil)
    if !same { root[keyPath: keyPath] = value }
}
