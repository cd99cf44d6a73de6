// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import Observation

/// One message a ``LiveStreamModel`` received.
public struct LiveStreamMessage<Message: Sendable>: Sendable {
    /// The message decoded as `Message`; `nil` when it does not decode (the model's `error` says why).
    public let message: Message?
    /// The message as the daemon sent it: `seq`, `from`, `to`, `at`, the raw JSON.
    public let body: StreamMessageBody
}

/// A Live Service stream's messages as an `@Observable` model: what is sent to the daemon's user (listening) or
/// what a user posts (following), the newest `keeping` of them, with the listening's state. Updated on the main
/// actor; listening starts when the model is made and ends when it is released (or ``stop()``).
///
/// ```swift
/// let inbox = LiveStreamModel(daemon.stream("songs", of: Song.self))
/// List(inbox.messages, id: \.body.seq) { Text($0.message?.title ?? "?") }
/// ```
@MainActor
@Observable
public final class LiveStreamModel<Message: Codable & Sendable> {
    /// The newest messages, oldest first (at most `keeping`).
    public private(set) var messages: [LiveStreamMessage<Message>] = []
    /// Whether the listening is in place (the daemon accepted it).
    public private(set) var isListening = false
    /// How many times messages may have been lost (the daemon was away, or its link to the cloud was down longer
    /// than the cloud's log reaches back): what was sent meanwhile is not replayed.
    public private(set) var resyncs = 0
    /// The daemon's refusal or the cloud's end of the subscription, or a message that did not decode.
    public private(set) var error: LiveGateError?

    @ObservationIgnored public let stream: LiveStream<Message>
    @ObservationIgnored public let keeping: Int
    @ObservationIgnored private var token: NotificationToken?
    @ObservationIgnored private var stopped = false

    /// Listens to what is sent to the daemon's user on `stream` or, given `user`, follows what `user` posts.
    public init(_ stream: LiveStream<Message>, following user: String? = nil, keeping: Int = 100) {
        self.stream = stream
        self.keeping = max(1, keeping)
        Task { [weak self] in
            do {
                let handler: @MainActor @Sendable (LiveStreamEvent<Message>) -> Void = { [weak self] event in self?.apply(event) }
                let token =
                    if let user { try await stream.followOnMainActor(user, handler) } else { try await stream.listenOnMainActor(handler) }
                guard let self, !self.stopped else { return token.invalidate() }
                self.token = token
                self.isListening = true
            } catch {
                self?.error = .describing(error)
            }
        }
    }

    /// Ends the listening now (releasing the model does too).
    public func stop() {
        stopped = true
        token?.invalidate()
        token = nil
        setIfChanged(self, \.isListening, false)
    }

    private func apply(_ event: LiveStreamEvent<Message>) {
        switch event {
        case .message(let message, let body, let decodingError):
            if messages.count >= keeping { messages.removeFirst(messages.count - keeping + 1) }
            messages.append(LiveStreamMessage(message: message, body: body))
            if let decodingError { setIfChanged(self, \.error, decodingError) }
        case .resync:
            resyncs += 1
        case .error(let failure):
            setIfChanged(self, \.error, failure)
            setIfChanged(self, \.isListening, false)
        }
    }
}
