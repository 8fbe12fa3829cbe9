import Foundation

/// Runs blocking work (a long protocol run, a child process) on a thread of its own and
/// suspends until it is done: the test runner shares a thread per core among all tests,
/// and a test that blocks one for many seconds holds up every other test.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}
