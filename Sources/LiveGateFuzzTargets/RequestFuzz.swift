// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveGateProtocol
import LiveJSON

/// A request frame as the daemon reads it: LiveJSON's strict parser, the JSON-RPC envelope of the value or of
/// each member of a batch, and every method's params decoded as the daemon decodes them. Must hold: parsing
/// never crashes; what parses writes back (`JSONWriter`) to text that parses to the same value; an envelope
/// that reads keeps its id as the value had it; params decoding throws or succeeds, nothing else.
enum RequestFuzz {
    static let paramTypes: [any (Decodable & Sendable).Type] = [
        HelloParams.self, ObjectObserveParams.self, TokenParams.self, ObjectWriteParams.self, ObjectDeleteParams.self,
        CollectionObserveParams.self, CollectionItemsParams.self, FeedSubscribeParams.self, SessionStateParams.self,
        SetLogLevelParams.self, StreamSendParams.self, StreamPostParams.self, StreamListenParams.self, StreamAccessParams.self,
    ]

    static func run(_ bytes: [UInt8]) throws(FuzzViolation) {
        let value: JSONValue
        do {
            value = try JSONValue(parsing: bytes)
        } catch {
            return
        }
        var writer = JSONWriter()
        do {
            try writer.write(value)
        } catch {
            throw FuzzViolation("a parsed value did not write back: \(error)")
        }
        let reparsed: JSONValue
        do {
            reparsed = try JSONValue(parsing: writer.bytes)
        } catch {
            throw FuzzViolation("the written text does not parse: \(error); text \(String(decoding: writer.bytes, as: UTF8.self).prefix(200))")
        }
        try check(reparsed == value, "write then parse changed the value")

        let requests: [JSONValue]
        if case .array(let members) = value { requests = members } else { requests = [value] }
        for request in requests.prefix(RequestLimits.maxBatchRequests) {
            guard case .success(let envelope) = RPCRequestEnvelope.read(request) else { continue }
            if let id = request["id"] {
                try check(envelope.id == RequestID(id), "the envelope's id \(String(describing: envelope.id)) is not the request's \(id)")
            } else {
                try check(envelope.id == nil, "a request without an id read as one with id \(String(describing: envelope.id))")
            }
            // As the daemon decodes params (RequestHandler.decode): LiveJSON's decoder, for every method.
            for type in paramTypes { _ = try? JSONValueDecoder.decode(type, from: envelope.params ?? .object(JSONObject())) }
        }
    }
}
