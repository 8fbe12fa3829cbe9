import Logging
import PushClient
import PushClock
import PushEventLoop
import PushSecurity
import PushService
import PushStoreLogic
import PushWire

/// Hands the pushes of SENDs to a gateway ([4.17-3]) and keeps each until a gateway has
/// answered it with PUSH_ACK ([4.17-4]). One per loop of a store started with `--gateway`:
/// the loop that committed a SEND forwards its push over its own connection, pipelined, so
/// a push waits for nothing but the commit it follows.
///
/// Entries live in the database (the outbox) from their commit on; what this holds in
/// memory is only the work queue. A push whose connection ends before its answer is sent
/// again on the next one; a gateway's ERROR sends it again after a pause. With several
/// gateway addresses a BUSY instead moves the link on to the next address, where the push
/// goes again at once unless that gateway too answered BUSY lately (`GatewayBusyPauses`):
/// a cluster node cut off from the others answers BUSY for devices another node can reach
/// ([4.13-13]). Nothing is dropped
/// but a push whose payload has expired ([4.17-4]): a RECALLed payload's push may still be
/// sent, and a device that fetches it gets NOT_FOUND, as for any recalled payload.
///
/// What comes back from the database (at start, and after more pushes waited than memory
/// holds) may repeat a push already sent by this or another loop: the gateway takes the
/// repeat as the same push (`once`, [4.13-12], [4.17-8]). Loop-confined.
public final class OutboxForwarder {
    /// Outbox pushes no gateway has answered, after a sequence number, oldest first; the
    /// completion runs on the loop, perhaps before this returns.
    public typealias WaitingPushes = (_ after: UInt64, _ limit: Int,
                                      _ completion: @escaping (Result<[OutboxEntry], StoreBackendError>) -> Void) -> Void

    private let loop: EventLoop
    private let link: ServerLink
    private let wallClock: () -> UInt64
    private let logger: Logger
    private let metrics: OutboxMetrics
    /// Records gateways' answers in the outbox (`WriteOperation.pushesHanded`).
    private let record: ([HandedPush]) -> Void
    private let waitingPushes: WaitingPushes
    private let speaksForProcess: Bool
    /// Whether a payload was recalled lately, on any loop of the process.
    public var wasRecalled: (PayloadID) -> Bool = { _ in false }

    /// Waiting to be sent, oldest first, from `head`.
    private var queue: [OutboxEntry] = []
    private var head = 0
    /// Sent, not yet answered, by sequence.
    private var inFlight: [UInt64: OutboxEntry] = [:]
    /// Answers not yet recorded (one write operation per loop turn).
    private var answered: [HandedPush] = []
    private var recordScheduled = false
    /// Where the next read of the database starts, while there is one to make: at start,
    /// and once pushes were left to the database because memory held `maxHeld`.
    private var scanCursor: UInt64?
    private var scanning = false
    private var pauseTimer: LoopTimer?
    private var stopped = false
    private var wasUp = false
    private var downLog = LogThrottle(intervalMs: 60_000)
    /// With several gateway addresses: which answered BUSY lately, and for how long they
    /// wait. Nil with one address, where a BUSY is retried after a pause like any ERROR.
    private var busyPauses: GatewayBusyPauses?
    private var busyLog = LogThrottle(intervalMs: 60_000)
    /// Pushes committed while memory held `maxHeld`, not yet read back from the database.
    private var spilled = 0

    /// Pushes sent and not answered, at most (the gateway's window bounds it further).
    static let maxInFlight = 4_096
    /// Pushes held in memory, at most; beyond it they wait in the database only.
    static let maxHeld = 100_000
    /// Pushes read from the database at a time.
    static let scanPage = 1_000
    /// After a gateway's ERROR, before the push is sent again.
    static let retryPauseMs = 1_000
    /// How often a store on PostgreSQL looks for pushes whose lease is over.
    public static let claimEveryMs = 5_000
    private let rescanEveryMs: Int?
    private var rescanTimer: LoopTimer?

    /// - Parameters:
    ///   - gateway: the gateways' addresses; the link uses one at a time and moves on when it fails.
    ///   - providerKey: the deployment's provider key: the store connects as a provider (role 2).
    ///   - scanAtStart: whether to read the pushes a previous run left waiting (the loop that
    ///     speaks for the process does; on PostgreSQL every store reads its own).
    public init(loop: EventLoop, gateway: ServerLink.Endpoint, providerKey: SecretKey, wallClock: @escaping () -> UInt64,
                logger: Logger, metrics: OutboxMetrics, scanAtStart: Bool, speaksForProcess: Bool, rescanEveryMs: Int? = nil,
                waitingPushes: @escaping WaitingPushes, record: @escaping ([HandedPush]) -> Void) {
        self.loop = loop
        self.wallClock = wallClock
        self.logger = logger
        self.metrics = metrics
        self.record = record
        self.waitingPushes = waitingPushes
        self.speaksForProcess = speaksForProcess
        self.rescanEveryMs = rescanEveryMs
        scanCursor = scanAtStart ? 0 : nil
        let credentials = HelloCredential.provider(providerKey)
        link = ServerLink(loop: loop, endpoint: gateway) {
            Hello(role: .provider, credential: credentials.make(for: .gateway, nowMs: wallClock()), name: "securepush-store")
        }
        // A gateway that refuses the credential may be one being set up: keep trying, and
        // say so in the log.
        link.stopOnPermanentFailure = false
        if gateway.addresses.count > 1 { busyPauses = GatewayBusyPauses() }
    }

    public func start() {
        link.onReady = { [weak self] in self?.linkUp() }
        link.onDown = { [weak self] error in self?.linkDown(error) }
        link.start()
        if let rescanEveryMs {
            rescanTimer = loop.schedule(after: .milliseconds(rescanEveryMs), repeating: true) { [weak self] in
                guard let self else { return }
                if scanCursor == nil { scanCursor = 0 }
                pump()
            }
        }
        metrics.collect(depth: { [weak self] in Double(self.map { $0.held + $0.spilled } ?? 0) },
                        oldestAge: { [weak self] in self?.oldestAgeSeconds() ?? 0 })
    }

    /// Closes the link; what is unanswered stays in the outbox for the next run.
    public func stop() {
        stopped = true
        pauseTimer?.cancel()
        rescanTimer?.cancel()
        flushAnswers()
        link.stop()
        metrics.linkUp.set(0)
    }

    /// A SEND is durable: hand its push over ([4.17-3]).
    public func committed(_ entry: OutboxEntry) {
        if held >= OutboxForwarder.maxHeld {
            // It waits in the database; a read from there finds it once memory has room.
            if scanCursor == nil { scanCursor = entry.sequence - 1 }
            spilled += 1
            return
        }
        queue.append(entry)
        pump()
    }

    private var held: Int { queue.count - head + inFlight.count }

    // MARK: sending

    private func pump() {
        guard !stopped, link.isReady, pauseTimer == nil else { return }
        if let waitMs = busyPauses?.waitMs(at: link.currentAddress, nowMs: Clocks.monotonicMilliseconds()), waitMs > 0 {
            return pause(ms: Int(waitMs))
        }
        refillFromDatabase()
        let nowMs = wallClock()
        while inFlight.count < OutboxForwarder.maxInFlight, head < queue.count {
            let entry = queue[head]
            head += 1
            guard inFlight[entry.sequence] == nil else { continue }
            guard let push = entry.pushToSend(nowMs: nowMs) else {
                // Its payload expired before any gateway took the push ([4.17-4]).
                metrics.expired.increment()
                continue
            }
            if let id = PayloadID(bytes: push.id), wasRecalled(id) {
                // Recalled before any gateway took it ([4.17-4]); the row stays waiting, and
                // the database read skips it, since its payload is no longer live.
                metrics.recalled.increment()
                continue
            }
            inFlight[entry.sequence] = entry
            link.request(.push(push)) { [weak self] result in self?.answer(entry, result) }
        }
        compactQueue()
    }

    private func answer(_ entry: OutboxEntry, _ result: Result<Message, ClientError>) {
        guard inFlight.removeValue(forKey: entry.sequence) != nil else { return }
        switch result {
        case .success(.pushAck(let ack)):
            let nowMs = wallClock()
            metrics.forwarded.increment()
            metrics.latency.observe(nanoseconds: (nowMs > entry.createdAt ? nowMs - entry.createdAt : 0) * 1_000_000)
            answered.append(HandedPush(sequence: entry.sequence, ack: ack, handedAt: nowMs))
            busyPauses?.acknowledged(at: link.currentAddress)
            scheduleRecord()
            pump()
        case .success(let other):
            retry(entry, because: "the gateway answered PUSH with \(other.type)")
        case .failure(.disconnected), .failure(.stopped):
            // The connection ended before the answer: sent again on the next ([4.17-4]).
            requeue(entry)
        case .failure(.status(.busy, let text)) where busyPauses != nil:
            moveOn(entry, because: text)
        case .failure(let error):
            retry(entry, because: "\(error)")
        }
    }

    /// A gateway's ERROR: the push waits a moment, then goes again.
    private func retry(_ entry: OutboxEntry, because reason: String) {
        metrics.retries.increment()
        if let count = downLog.event(nowMs: Clocks.monotonicMilliseconds()) {
            logger.warning("a gateway did not take a SEND's push; it stays in the outbox and is sent again",
                           metadata: ["gateway": "\(link.currentAddress)", "error": "\(reason)", "times": "\(count)"])
        }
        requeue(entry)
        pause(ms: OutboxForwarder.retryPauseMs)
    }

    /// A gateway's BUSY, with other addresses to try: the push goes again through the next
    /// one, once the pushes still outstanding here are answered (`ServerLink.moveOn`); the
    /// BUSYs of those pushes only requeue theirs.
    private func moveOn(_ entry: OutboxEntry, because text: String?) {
        metrics.retries.increment()
        requeue(entry)
        let from = link.currentAddress
        let nowMs = Clocks.monotonicMilliseconds()
        // Not ready: already moving on, and this BUSY is of a push sent before.
        guard link.isReady else { return }
        guard busyPauses?.busy(at: from, nowMs: nowMs) == true else {
            // A BUSY within this address's pause, which the link did not leave: try again later.
            return pause(ms: OutboxForwarder.retryPauseMs)
        }
        metrics.busyMoves.increment()
        wasUp = false
        if let count = busyLog.event(nowMs: nowMs) {
            logger.info("a gateway answered a SEND's push BUSY; handing the pushes of SENDs to the next gateway",
                        metadata: ["gateway": "\(from)", "error": "\(text ?? "BUSY")", "times": "\(count)"])
        }
        link.moveOn()
    }

    private func pause(ms: Int) {
        guard pauseTimer == nil else { return }
        pauseTimer = loop.schedule(after: .milliseconds(ms)) { [weak self] in
            self?.pauseTimer = nil
            self?.pump()
        }
    }

    private func requeue(_ entry: OutboxEntry) {
        if head > 0 {
            head -= 1
            queue[head] = entry
        } else {
            queue.insert(entry, at: 0)
        }
    }

    private func compactQueue() {
        if head == queue.count {
            queue.removeAll(keepingCapacity: queue.capacity <= 4_096)
            head = 0
        } else if head > 4_096, head * 2 > queue.count {
            queue.removeFirst(head)
            head = 0
        }
    }

    /// Reads waiting pushes from the database while a read is due and memory has room.
    private func refillFromDatabase() {
        guard !scanning, let cursor = scanCursor, queue.count - head < OutboxForwarder.maxInFlight else { return }
        scanning = true
        waitingPushes(cursor, OutboxForwarder.scanPage) { [weak self] result in
            // On the next turn: a backend that answers at once would otherwise re-enter `pump`.
            self?.loop.schedule(after: .zero) { [weak self] in self?.scanned(from: cursor, result) }
        }
    }

    private func scanned(from cursor: UInt64, _ result: Result<[OutboxEntry], StoreBackendError>) {
        scanning = false
        guard !stopped else { return }
        switch result {
        case .success(let page):
            let known = Set(queue[head...].map(\.sequence))
            for entry in page where inFlight[entry.sequence] == nil && !known.contains(entry.sequence) {
                queue.append(entry)
                spilled = max(0, spilled - 1)
            }
            scanCursor = page.count < OutboxForwarder.scanPage ? nil : page.last.map(\.sequence)
            if !page.isEmpty, cursor == 0, speaksForProcess {
                logger.info("handing over the pushes of SENDs left waiting in the outbox", metadata: ["first_page": "\(page.count)"])
            }
            pump()
        case .failure(let error):
            // Read again after the pause; the pushes stay in the outbox meanwhile.
            logger.warning("cannot read the outbox; trying again", metadata: ["error": "\(error)"])
            pause(ms: OutboxForwarder.retryPauseMs)
        }
    }

    // MARK: recording answers

    /// Answers are recorded a moment after they come, many to a write: a record alone
    /// would cost a commit of its own (an fsync, on SQLite) on the path of the next SEND's.
    /// Losing the last moment's records to a crash costs only a push sent again, which the
    /// gateway takes once ([4.17-8]); STATUS shows an answer that much later ([4.12-2]).
    static let recordDelayMs = 50
    static let recordBatch = 1024

    private func scheduleRecord() {
        if answered.count >= OutboxForwarder.recordBatch { return flushAnswers() }
        guard !recordScheduled else { return }
        recordScheduled = true
        loop.schedule(after: .milliseconds(OutboxForwarder.recordDelayMs)) { [weak self] in self?.flushAnswers() }
    }

    private func flushAnswers() {
        recordScheduled = false
        guard !answered.isEmpty else { return }
        let batch = answered
        answered = []
        record(batch)
    }

    // MARK: the link

    private func linkUp() {
        metrics.linkUp.set(1)
        wasUp = true
        logger.info("connected to a gateway; handing it the pushes of SENDs",
                    metadata: ["gateway": "\(link.currentAddress)", "waiting": "\(held)"])
        pump()
    }

    private func linkDown(_ error: ClientError) {
        metrics.linkUp.set(0)
        let metadata: Logger.Metadata = ["gateway": "\(link.currentAddress)", "error": "\(error)", "waiting": "\(held)"]
        if wasUp {
            wasUp = false
            _ = downLog.event(nowMs: Clocks.monotonicMilliseconds())
            logger.warning("lost the link to the gateway; SENDs are still accepted and their pushes wait in the outbox",
                           metadata: metadata)
        } else if let count = downLog.event(nowMs: Clocks.monotonicMilliseconds()) {
            var metadata = metadata
            metadata["attempts"] = "\(count)"
            logger.warning("cannot reach a gateway; SENDs are still accepted and their pushes wait in the outbox",
                           metadata: metadata)
        }
    }

    private func oldestAgeSeconds() -> Double {
        var oldest = UInt64.max
        for entry in inFlight.values { oldest = min(oldest, entry.createdAt) }
        if head < queue.count { oldest = min(oldest, queue[head].createdAt) }
        guard oldest != .max else { return 0 }
        let now = wallClock()
        return now > oldest ? Double(now - oldest) / 1000 : 0
    }
}
