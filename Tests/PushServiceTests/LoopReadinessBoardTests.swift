import PushService
import Testing

@Suite("LoopReadinessBoard: one readiness for a service's loops")
struct LoopReadinessBoardTests {
    @Test("ready with no reports, and while every loop reports ready")
    func readyWhenEveryLoopIs() {
        let board = LoopReadinessBoard()
        #expect(board.readiness(nowMs: 1_000) == .ready)
        board.report(.ready, loop: 1, nowMs: 1_000)
        board.report(.ready, loop: 2, nowMs: 1_000)
        #expect(board.readiness(nowMs: 1_100) == .ready)
    }

    @Test("a loop that is not ready makes the whole not ready, with its number and reason; the lowest-numbered speaks")
    func notReadyNamesTheLoop() {
        let board = LoopReadinessBoard()
        board.report(.ready, loop: 1, nowMs: 1_000)
        board.report(.notReady("write connection: database unreachable"), loop: 3, nowMs: 1_000)
        board.report(.notReady("connecting to the database"), loop: 2, nowMs: 1_000)
        #expect(board.readiness(nowMs: 1_000) == .notReady("loop 2: connecting to the database"))
        board.report(.ready, loop: 2, nowMs: 1_200)
        board.report(.ready, loop: 3, nowMs: 1_200)
        #expect(board.readiness(nowMs: 1_200) == .ready)
    }

    @Test("a loop silent for longer than silentAfterMs is not answering; a loop removed on purpose is forgotten")
    func silentLoopIsNotReady() {
        let board = LoopReadinessBoard()
        board.report(.ready, loop: 1, nowMs: 0)
        board.report(.ready, loop: 2, nowMs: 0)
        #expect(board.readiness(nowMs: LoopReadinessBoard.silentAfterMs) == .ready)
        board.report(.ready, loop: 2, nowMs: 6_000)
        #expect(board.readiness(nowMs: 6_000) == .notReady("loop 1 has not answered for 6 s"))
        board.remove(loop: 1)
        #expect(board.readiness(nowMs: 6_000) == .ready)
    }
}
