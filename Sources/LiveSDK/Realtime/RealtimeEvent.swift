// Licensed under the Apache License, Version 2.0.

import Foundation
import HTTPTypes
import LiveCloudAPI
import LiveJSON
import Logging
import NIOCore
import NIOPosix
import NIOWebSocket
import Synchronization
import WSClient

/// What the realtime connection tells the engine.
package enum RealtimeEvent: Sendable, Equatable {
    /// The WebSocket is open and every wanted topic has been (re)subscribed, resuming from the last event
    /// seen where the cloud could replay what was missed. The objects of `needRefresh` could not be resumed
    /// (never had a baseline, the cloud said resync, or refused them) and must be fetched again. Those of
    /// `refused` were refused: a ``subscriptionRefused(_:code:message:)`` told of each before; their feeds and
    /// streams got that error instead of a resync notice.
    case connected(needRefresh: Set<Topic>, refused: Set<Topic>)
    case statusChanged(ConnectionStatus)
    /// An entity changed on a subscribed topic (a write is published on its object topic and on its
    /// collection's topic: subscribed to both, the engine hears it twice).
    /// `previous`: the object's data before the write (`nil` when it did not exist).
    case entityChanged(seq: Int64, topic: Topic, entity: Entity, previous: JSONValue?)
    /// A message arrived on a subscribed stream topic.
    case streamMessage(seq: Int64, topic: Topic, message: StreamMessage)
    /// The cloud refused to subscribe the topic (when it was subscribed on connect, not by ``RealtimeConnection/acquire(_:)``,
    /// which returns the refusal itself).
    case subscriptionRefused(Topic, code: CloudErrorCode?, message: String)
    /// A resumed subscription's replay is over: the engine has every event of the topic up to the resume's
    /// acknowledgement (follows the last replayed event).
    case caughtUp(Topic)
}
