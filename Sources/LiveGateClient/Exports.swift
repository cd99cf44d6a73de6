// Licensed under the Apache License, Version 2.0.

// The types of the client's API that the wire format defines (`SortParams`, `QueryParams`, the statuses, the
// change sets) and the JSON value type: an app that imports LiveGateClient uses them without importing the
// modules they live in, which it does not depend on by name (README, "Using the Swift client in an app").
@_exported import LiveChangeSet
@_exported import LiveGateProtocol
@_exported import LiveJSON
