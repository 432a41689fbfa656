@testable import KeychainFS
import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import SystemPackage
import XCTest

/// The FUSE bridge without FUSE: the pending writes, open handles and inode table, and
/// the request handlers driven as the kernel would, against the real kernel keyrings.
/// Every stored value is checked through `Keychain(service:)`.
final class BridgeTests: KeyringTestCase {
    /// The process that opens files in these tests (XCTest runs them on the main thread,
    /// whose thread id is the process id).
    private let opener = getpid()

    // MARK: - PendingWrite

    func testWritesAtOffsetsReplaceBytesAndPwritePastTheEndZeroFillsOnlyTheGap() throws {
        let pending = PendingWrite(node: .item(service: KeyName(uniqueService()), name: "k"), bytes: bytes("hello"), dirty: false, newItem: nil)
        try write(pending, "J", at: 0)
        XCTAssertEqual(contents(pending), bytes("Jello"))
        try write(pending, "XY", at: 3)
        XCTAssertEqual(contents(pending), bytes("JelXY"))
        try write(pending, "!", at: 8)
        XCTAssertEqual(contents(pending), bytes("JelXY") + [0, 0, 0] + bytes("!"), "only the gap 5..<8 is zeros")
        try write(pending, "ab", at: 6)
        XCTAssertEqual(contents(pending), bytes("JelXY") + [0] + bytes("ab!"), "a write into the gap replaces its zeros")
        XCTAssertEqual(pending.size, 9)
        XCTAssertEqual(pending.read(offset: 3, count: 2), bytes("XY"))
        XCTAssertEqual(pending.read(offset: 7, count: 100), bytes("b!"))
        XCTAssertEqual(pending.read(offset: 9, count: 1), [])
    }

    func testAppendingOpenWritesAtItsOwnEndWhateverOffsetIsPassed() throws {
        let pending = PendingWrite(node: .item(service: KeyName(uniqueService()), name: "k"), bytes: bytes("ab"), dirty: false, newItem: nil, appends: true)
        try write(pending, "C", at: 0)
        try write(pending, "D", at: 100)
        try write(pending, "E", at: 1)
        XCTAssertEqual(contents(pending), bytes("abCDE"))
    }

    func testWritePastTheKeySizeLimitFailsWithEFBIGAndPoisonsTheFileUntilTruncatedToZero() throws {
        let service = KeyName(uniqueService())
        try Keychain(service: service).set("old", forKey: "k")
        let filesystem = makeFilesystem()
        let pending = PendingWrite(node: .item(service: service, name: "k"), bytes: bytes("old"), dirty: false, newItem: nil)
        try write(pending, [UInt8](repeating: 0x61, count: KeychainError.maximumValueSize), at: 0)  // exactly 32767: fits
        assertErrno(.fileTooLarge) { try self.write(pending, "x", at: KeychainError.maximumValueSize) }
        XCTAssertEqual(pending.size, KeychainError.maximumValueSize, "the refused write added nothing")
        assertErrno(.fileTooLarge, "commit of a poisoned file") { try pending.commit(to: filesystem) }
        XCTAssertEqual(try Keychain(service: service).string(forKey: "k"), "old", "nothing stored")
        assertErrno(.fileTooLarge, "a later small write") { try self.write(pending, "y", at: 0) }
        assertErrno(.fileTooLarge, "a second commit") { try pending.commit(to: filesystem) }
        XCTAssertEqual(try Keychain(service: service).string(forKey: "k"), "old")

        try pending.resize(to: 0)
        try write(pending, "new", at: 0)
        try pending.commit(to: filesystem)
        XCTAssertEqual(try Keychain(service: service).string(forKey: "k"), "new", "truncation to 0 cleared the failure")
    }

    func testQuotaRefusalPoisonsTheFileLikeEFBIG() throws {
        let service = KeyName(uniqueService())
        try Keychain(service: service).set("old", forKey: "k")
        let filesystem = makeFilesystem()
        let pending = PendingWrite(node: .item(service: service, name: "k"), bytes: bytes("old"), dirty: false, newItem: nil)
        var asked: [[Int]] = []
        let room: (Int, Int) throws(FilesystemError) -> Void = { checked, size in asked.append([checked, size]) }
        let noRoom: (Int, Int) throws(FilesystemError) -> Void = { checked, size throws(FilesystemError) in
            asked.append([checked, size])
            throw FilesystemError(.diskQuotaExceeded)
        }
        try write(pending, "O", at: 0, room: room)
        XCTAssertEqual(asked, [[3, 3]], "the first write asks, whatever its size (the vault's disk may have no room for any)")
        try write(pending, "O", at: 0, room: noRoom)
        XCTAssertEqual(asked, [[3, 3]], "a later write that does not grow the value asks nothing")
        assertErrno(.diskQuotaExceeded) { try self.write(pending, "longer value", at: 0, room: noRoom) }
        XCTAssertEqual(asked, [[3, 3], [3, 12]])
        XCTAssertEqual(contents(pending), bytes("Old"), "the refused write added nothing")
        assertErrno(.diskQuotaExceeded, "commit of a poisoned file") { try pending.commit(to: filesystem) }
        XCTAssertEqual(try Keychain(service: service).string(forKey: "k"), "old")
        assertErrno(.diskQuotaExceeded, "a later write, even with room") { try self.write(pending, "z", at: 0) }

        try pending.resize(to: 0)
        try write(pending, "ok", at: 0)
        try pending.commit(to: filesystem)
        XCTAssertEqual(try Keychain(service: service).string(forKey: "k"), "ok")
    }

    func testCommitOfAnUnlinkedFileStoresNothing() throws {
        let service = KeyName(uniqueService())
        try Keychain(service: service).set("old", forKey: "k")
        let node = Node.item(service: service, name: "k")
        let pending = PendingWrite(node: node, bytes: bytes("old"), dirty: false, newItem: nil)
        let handles = OpenHandles()
        _ = handles.add(OpenFile(writing: pending, opener: opener))
        try write(pending, "new", at: 0)
        XCTAssertTrue(handles.unlinkPending(node))
        XCTAssertTrue(pending.isUnlinked)
        try pending.commit(to: makeFilesystem())
        XCTAssertEqual(try Keychain(service: service).string(forKey: "k"), "old")
    }

    func testCommitAfterTheItemWasRemovedBehindItsBackStoresNothingAndRecreatesNothing() throws {
        let service = KeyName(uniqueService()), gone = KeyName(uniqueService())
        try Keychain(service: service).set("old", forKey: "k")
        try Keychain(service: service).set("other", forKey: "keep")
        try Keychain(service: gone).set("old", forKey: "k")
        let filesystem = makeFilesystem()
        let item = PendingWrite(node: .item(service: service, name: "k"), bytes: bytes("old"), dirty: false, newItem: nil)
        let inGoneService = PendingWrite(node: .item(service: gone, name: "k"), bytes: bytes("old"), dirty: false, newItem: nil)
        try write(item, "new", at: 0)
        try write(inGoneService, "new", at: 0)
        XCTAssertTrue(try Keychain(service: service).remove("k"))  // kc rm, meanwhile
        try Keychain(service: gone).removeAll()                   // the whole service, meanwhile

        try item.commit(to: filesystem)
        try inGoneService.commit(to: filesystem)
        XCTAssertNil(try Keychain(service: service).item("k"), "the removed item is not re-created")
        XCTAssertEqual(try Keychain(service: service).allKeys(), ["keep"])
        XCTAssertFalse(try Keychain(service: gone).serviceExists(), "the removed service is not re-created")
        XCTAssertTrue(item.isUnlinked, "it is detached from the name now")

        try write(item, "again", at: 0)  // a later write and close still store nothing
        try item.commit(to: filesystem)
        XCTAssertNil(try Keychain(service: service).item("k"))
    }

    func testCommitOfANewFileCreatesTheItemAtItsLevelAndDeadline() throws {
        let service = KeyName(uniqueService())
        let deadline = Deadline.fromNow(seconds: 900)
        let pending = PendingWrite(node: .item(service: service, name: "k"), bytes: [], dirty: true,
                                   newItem: NewItemAttributes(accessibility: .afterFirstUnlock, deadline: deadline))
        try write(pending, "fresh", at: 0)
        XCTAssertNil(try Keychain(service: service).item("k"), "nothing before the close")
        try pending.commit(to: makeFilesystem())
        let keychain = try Keychain(service: service)
        XCTAssertEqual(try keychain.string(forKey: "k"), "fresh")
        XCTAssertEqual(try keychain.item("k")?.accessibility, .afterFirstUnlock)
        assertDeadline(try keychain.deadline(forKey: "k"), near: deadline)
        XCTAssertNil(pending.newItem, "it is an item now")
    }

    func testExtendedAttributesSetOnANewFileChangeWhatIsCreated() throws {
        let service = KeyName(uniqueService())
        let pending = PendingWrite(node: .item(service: service, name: "k"), bytes: [], dirty: true,
                                   newItem: NewItemAttributes(accessibility: .whenUnlocked))
        XCTAssertTrue(try pending.setAttribute("user.kc.access", to: "after-first-unlock\n"))
        XCTAssertTrue(try pending.setAttribute("user.kc.this-device-only", to: "1"))
        XCTAssertTrue(try pending.setAttribute("user.kc.timeout", to: "600"))
        assertErrno(.invalidArgument) { _ = try pending.setAttribute("user.kc.access", to: "sometimes") }
        XCTAssertEqual(pending.newItem?.accessibility, .afterFirstUnlockThisDeviceOnly)
        let expected = Deadline.fromNow(seconds: 600)
        try write(pending, "v", at: 0)
        try pending.commit(to: makeFilesystem())
        let keychain = try Keychain(service: service)
        XCTAssertEqual(try keychain.string(forKey: "k"), "v")
        XCTAssertEqual(try keychain.item("k")?.accessibility, .afterFirstUnlockThisDeviceOnly)
        assertDeadline(try keychain.deadline(forKey: "k"), near: expected)
        XCTAssertFalse(try pending.setAttribute("user.kc.access", to: "always"), "once it is an item, attributes go to the item")
    }

    func testCommitToAnExistingItemReplacesItsValueKeepingItsLevelAndDeadline() throws {
        let (service, deadline) = try makeTimedItem("k", "v1")
        let serial = try Keychain(service: service).item("k")?.serial
        let pending = PendingWrite(node: .item(service: service, name: "k"), bytes: [], dirty: true, newItem: nil)
        try write(pending, "v2", at: 0)
        try pending.commit(to: makeFilesystem())
        let keychain = try Keychain(service: service)
        XCTAssertEqual(try keychain.string(forKey: "k"), "v2")
        // The kernel's update clears a key's expiry, so a timed item is replaced by a
        // new key, armed first, moved over the old one: a new serial, the same deadline.
        XCTAssertNotEqual(try keychain.item("k")?.serial, serial, "replaced by displacement")
        XCTAssertEqual(try keychain.items().map(\.name), ["k"], "one item")
        XCTAssertEqual(try keychain.item("k")?.accessibility, .afterFirstUnlock)
        assertDeadline(try keychain.deadline(forKey: "k"), near: deadline)
    }

    func testSecondCommitAfterMoreWritesStoresTheNewBytes() throws {
        let service = KeyName(uniqueService())
        let filesystem = makeFilesystem()
        let pending = PendingWrite(node: .item(service: service, name: "k"), bytes: [], dirty: true,
                                   newItem: NewItemAttributes(accessibility: .whenUnlocked))
        try write(pending, "one", at: 0)
        try pending.commit(to: filesystem)
        XCTAssertEqual(try Keychain(service: service).string(forKey: "k"), "one")
        let serial = try Keychain(service: service).item("k")?.serial
        try write(pending, "+two", at: 3)
        try pending.commit(to: filesystem)
        XCTAssertEqual(try Keychain(service: service).string(forKey: "k"), "one+two")
        XCTAssertEqual(try Keychain(service: service).item("k")?.serial, serial, "the second commit replaces the value in place")
    }

    // MARK: - OpenHandles

    func testTheSizeOfANewFileBeingWrittenIsItsLargestPendingCopy() throws {
        let node = Node.item(service: KeyName(uniqueService()), name: "k")
        let handles = OpenHandles()
        XCTAssertNil(handles.pendingSize(of: node))
        let small = PendingWrite(node: node, bytes: bytes("abc"), dirty: false, newItem: nil)
        let large = PendingWrite(node: node, bytes: bytes("abcdefg"), dirty: false, newItem: nil)
        let elsewhere = PendingWrite(node: .item(service: "x", name: "k"), bytes: [UInt8](repeating: 1, count: 50), dirty: false, newItem: nil)
        _ = handles.add(OpenFile(writing: small, opener: opener))
        _ = handles.add(OpenFile(writing: large, opener: opener))
        _ = handles.add(OpenFile(writing: elsewhere, opener: opener))
        _ = handles.add(OpenFile(reading: [UInt8](repeating: 1, count: 99), opener: 0))
        XCTAssertEqual(handles.pendingSize(of: node), 7)
        try write(small, "0123456789", at: 0)
        XCTAssertEqual(handles.pendingSize(of: node), 10)
    }

    func testRmDetachesEveryWriterOfTheFile() throws {
        let service = KeyName(uniqueService())
        let node = Node.item(service: service, name: "k"), other = Node.item(service: service, name: "other")
        let handles = OpenHandles()
        let first = PendingWrite(node: node, bytes: [], dirty: true, newItem: nil)
        let second = PendingWrite(node: node, bytes: [], dirty: true, newItem: nil)
        let unrelated = PendingWrite(node: other, bytes: [], dirty: true, newItem: nil)
        for pending in [first, second, unrelated] { _ = handles.add(OpenFile(writing: pending, opener: opener)) }
        XCTAssertTrue(handles.unlinkPending(node))
        XCTAssertTrue(first.isUnlinked)
        XCTAssertTrue(second.isUnlinked)
        XCTAssertFalse(unrelated.isUnlinked)
        XCTAssertTrue(handles.pending(node).isEmpty)
        XCTAssertNil(handles.pendingSize(of: node))
        XCTAssertFalse(handles.unlinkPending(node), "nothing left to detach")
    }

    func testMvMovesPendingWritesOfTheFileAndOfFilesInARenamedServiceAndDetachesTheReplacedTarget() throws {
        let service = KeyName(uniqueService()), renamed = KeyName(uniqueService())
        let handles = OpenHandles()
        func open(_ node: Node) -> PendingWrite {
            let pending = PendingWrite(node: node, bytes: [], dirty: true, newItem: nil)
            _ = handles.add(OpenFile(writing: pending, opener: opener))
            return pending
        }
        let a = open(.item(service: service, name: "a"))
        let target = open(.item(service: service, name: "b"))
        let bystander = open(.item(service: service, name: "c"))

        XCTAssertTrue(handles.renamePending(.item(service: service, name: "a"), to: .item(service: service, name: "b")))
        XCTAssertEqual(a.node, .item(service: service, name: "b"))
        XCTAssertFalse(a.isUnlinked)
        XCTAssertTrue(target.isUnlinked, "the replaced file's writers store nothing")
        XCTAssertEqual(handles.pending(.item(service: service, name: "b")).map(ObjectIdentifier.init), [ObjectIdentifier(a)])
        XCTAssertTrue(handles.pending(.item(service: service, name: "a")).isEmpty)

        XCTAssertTrue(handles.renamePending(.service(service), to: .service(renamed)))
        XCTAssertEqual(a.node, .item(service: renamed, name: "b"))
        XCTAssertEqual(bystander.node, .item(service: renamed, name: "c"))
        XCTAssertEqual(target.node, .item(service: service, name: "b"), "a detached writer stays detached")
        XCTAssertFalse(handles.renamePending(.item(service: service, name: "nothing"), to: .item(service: service, name: "z")))
    }

    func testReleaseRemovesTheOpenFileOnce() throws {
        let handles = OpenHandles()
        let file = OpenFile(reading: bytes("v"), opener: 0)
        let handle = handles.add(file)
        let other = handles.add(OpenFile(reading: bytes("w"), opener: 0))
        XCTAssertNotEqual(handle, other)
        XCTAssertTrue(handles.file(handle) === file)
        XCTAssertTrue(handles.removeFile(handle) === file)
        XCTAssertNil(handles.removeFile(handle))
        XCTAssertNil(handles.file(handle))
        XCTAssertNotNil(handles.file(other))
    }

    // MARK: - InodeTable

    func testInodeIsDroppedWhenTheKernelForgetsItsLastLookup() throws {
        let table = InodeTable()
        let node = Node.item(service: "s", name: "k")
        let number = table.remember(node)
        XCTAssertEqual(table.remember(node), number)
        XCTAssertEqual(table.node(number), node)
        table.forget(number, count: 1)
        XCTAssertEqual(table.node(number), node, "one lookup left")
        table.forget(number, count: 1)
        XCTAssertNil(table.node(number))
        table.forget(number, count: 1)  // a stale forget harms nothing
        XCTAssertNil(table.node(number))
    }

    func testReaddirNumbersCountNoLookup() throws {
        let table = InodeTable()
        let node = Node.service("s")
        let number = table.peek(node)
        XCTAssertEqual(table.peek(node), number)
        XCTAssertEqual(table.node(number), node)
        XCTAssertEqual(table.remember(node), number)
        table.forget(number, count: 1)
        XCTAssertNil(table.node(number), "the peeks counted no lookup")
    }

    func testRootIsNeverDroppedAndNumbersAreNeverReused() throws {
        let table = InodeTable()
        XCTAssertEqual(table.node(InodeTable.rootNumber), .root)
        table.forget(InodeTable.rootNumber, count: 1000)
        XCTAssertEqual(table.node(InodeTable.rootNumber), .root)
        XCTAssertEqual(table.remember(.root), InodeTable.rootNumber)

        let node = Node.item(service: "s", name: "k")
        let first = table.remember(node)
        XCTAssertNotEqual(first, InodeTable.rootNumber)
        table.forget(first, count: 5)
        let second = table.remember(node)
        XCTAssertNotEqual(second, first, "a forgotten number is not given out again")
        let another = table.remember(.item(service: "s", name: "other"))
        XCTAssertFalse([InodeTable.rootNumber, first, second].contains(another))
        XCTAssertNil(table.node(first))
    }

    func testRenameMovesTheInodeNumberToTheNewName() throws {
        let table = InodeTable()
        let source = Node.item(service: "s", name: "a"), target = Node.item(service: "s", name: "b")
        let number = table.remember(source)
        table.renamed(source, to: target)
        XCTAssertEqual(table.node(number), target)
        XCTAssertEqual(table.peek(target), number)
        XCTAssertNotEqual(table.remember(source), number, "the old name is a new file")
        table.forget(number, count: 1)
        XCTAssertNil(table.node(number), "the lookup count moved with the number")
    }

    // MARK: - FuseBridge, end to end without FUSE

    func testCloseByTheOpenerStoresTheNewFile() throws {
        let service = KeyName(uniqueService())
        let bridge = makeBridge()
        let directory = try makeServiceDirectory(bridge, service)
        let (number, handle) = try create(bridge, directory, "token")
        try write(bridge, handle, "s3cret", at: 0)
        XCTAssertNil(try Keychain(service: service).item("token"), "nothing is stored before the close")
        XCTAssertEqual(try attributes(bridge.getattr(number)).size, 6, "stat shows the pending copy")
        try expectSuccess(bridge.flush(handle: handle, caller: opener))
        XCTAssertEqual(try Keychain(service: service).string(forKey: "token"), "s3cret")
        try expectSuccess(bridge.release(handle: handle))
        XCTAssertEqual(try Keychain(service: service).string(forKey: "token"), "s3cret")
        XCTAssertEqual(try readAll(bridge, number), bytes("s3cret"))
    }

    /// Issue 35: a reader was served the writer's unstored copy, empty right after the
    /// create and half written after its first write. Only a close makes it the item.
    func testAReaderOfANewFileFindsNothingUntilItsWriterCloses() throws {
        let service = KeyName(uniqueService())
        let bridge = makeBridge()
        let directory = try makeServiceDirectory(bridge, service)
        let (number, handle) = try create(bridge, directory, "token")
        assertErrno(.noSuchFileOrDirectory, "open to read right after the create") {
            _ = try self.readAll(bridge, number)
        }
        try write(bridge, handle, "half-", at: 0)
        assertErrno(.noSuchFileOrDirectory, "open to read after the first write") {
            _ = try self.readAll(bridge, number)
        }
        try write(bridge, handle, "value", at: 5)
        try expectSuccess(bridge.flush(handle: handle, caller: opener))
        XCTAssertEqual(try readAll(bridge, number), bytes("half-value"))
        try expectSuccess(bridge.release(handle: handle))
    }

    /// An open for writing without O_TRUNC (`>>`, `1<>`) starts from the stored value:
    /// of a new file whose creator has not closed, nothing. It inherits the attributes
    /// the item will be created with, and never the creator's unstored bytes (it stored
    /// "half-X", a value nobody wrote whole).
    func testAnAppendToANewFileStartsFromNothingStoredNotFromItsCreatorsCopy() throws {
        let service = KeyName(uniqueService())
        let bridge = makeBridge()
        let directory = try makeServiceDirectory(bridge, service)
        let (number, creator) = try create(bridge, directory, "token")
        try write(bridge, creator, "half-", at: 0)
        try expectSuccess(bridge.setxattr(number, name: "user.kc.access", value: "always"))
        let appender = try openHandle(bridge.open(number, flags: O_WRONLY | O_APPEND, caller: opener))
        let overwriter = try openHandle(bridge.open(number, flags: O_RDWR, caller: opener))
        guard case .bytes(let seen) = try bridge.read(handle: overwriter, size: 64, offset: 0) else { throw UnexpectedReply(reply: "read") }
        XCTAssertEqual(seen, [], "a read-write open reads what is stored: nothing yet")
        try appendOnce(bridge, number, appender, "X")
        try expectSuccess(bridge.flush(handle: appender, caller: opener))
        let keychain = try Keychain(service: service)
        XCTAssertEqual(try keychain.data(forKey: "token"), bytes("X"))
        XCTAssertEqual(try keychain.item("token")?.accessibility, .always, "stored as the new item the creator's close would make")
        try write(bridge, overwriter, "Y", at: 0)
        try expectSuccess(bridge.flush(handle: overwriter, caller: opener))
        XCTAssertEqual(try keychain.data(forKey: "token"), bytes("Y"))
        try write(bridge, creator, "value", at: 5)
        try expectSuccess(bridge.flush(handle: creator, caller: opener))
        XCTAssertEqual(try keychain.data(forKey: "token"), bytes("half-value"))
        XCTAssertEqual(try keychain.item("token")?.accessibility, .always)
        for handle in [creator, appender, overwriter] { expectSuccess(bridge.release(handle: handle)) }
        XCTAssertEqual(try keychain.data(forKey: "token"), bytes("half-value"))
    }

    func testCloseOfAnInheritedDescriptorInAChildStoresNothingUntilTheOpenerCloses() throws {
        let service = KeyName(uniqueService())
        let child = try spawnOtherProcess()
        let bridge = makeBridge()
        let directory = try makeServiceDirectory(bridge, service)
        let (_, handle) = try create(bridge, directory, "token")
        try write(bridge, handle, "half", at: 0)
        try expectSuccess(bridge.flush(handle: handle, caller: child))  // the child execs or exits
        XCTAssertNil(try Keychain(service: service).item("token"), "a child's close publishes nothing")
        try write(bridge, handle, "-and-the-rest", at: 4)
        try expectSuccess(bridge.flush(handle: handle, caller: opener))
        XCTAssertEqual(try Keychain(service: service).string(forKey: "token"), "half-and-the-rest")
        try expectSuccess(bridge.release(handle: handle))

        // The same for a save over an existing item.
        let number = try lookup(bridge, directory, "token")
        let save = try openHandle(bridge.open(number, flags: O_WRONLY | O_TRUNC, caller: opener))
        try write(bridge, save, "new", at: 0)
        try expectSuccess(bridge.flush(handle: save, caller: child))
        XCTAssertEqual(try Keychain(service: service).string(forKey: "token"), "half-and-the-rest")
        try expectSuccess(bridge.flush(handle: save, caller: opener))
        XCTAssertEqual(try Keychain(service: service).string(forKey: "token"), "new")
        try expectSuccess(bridge.release(handle: save))
    }

    func testOversizeWriteToATruncatingOpenFailsWithEFBIGAndKeepsTheOldValue() throws {
        let service = KeyName(uniqueService())
        let bridge = makeBridge()
        let directory = try makeServiceDirectory(bridge, service)
        try printf(bridge, directory, "f", "secret")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "f"), "secret")

        let number = try lookup(bridge, directory, "f")
        let handle = try openHandle(bridge.open(number, flags: O_WRONLY | O_TRUNC, caller: opener))
        let chunk = [UInt8](repeating: 0x41, count: 4096)
        var offset = 0
        var failure: Errno?
        while offset <= KeychainError.maximumValueSize {
            do {
                try write(bridge, handle, chunk, at: offset)
                offset += chunk.count
            } catch let error as FilesystemError {
                failure = error.errno
                break
            }
        }
        XCTAssertEqual(failure, .fileTooLarge)
        XCTAssertEqual(offset, 7 * 4096, "the eighth chunk would pass 32767 bytes")
        assertErrno(.fileTooLarge, "a later write") { try self.write(bridge, handle, "x", at: 0) }
        assertErrno(.fileTooLarge, "close") { _ = try bridge.flush(handle: handle, caller: self.opener) }
        XCTAssertEqual(try Keychain(service: service).string(forKey: "f"), "secret")
        try expectSuccess(bridge.release(handle: handle))
        XCTAssertEqual(try Keychain(service: service).string(forKey: "f"), "secret")

        // The next writer starts clean.
        try printf(bridge, directory, "f", "again", truncating: number)
        XCTAssertEqual(try Keychain(service: service).string(forKey: "f"), "again")
    }

    func testRmOfAFileOpenForWritingStoresNothingAtItsClose() throws {
        let service = KeyName(uniqueService())
        let bridge = makeBridge()
        let directory = try makeServiceDirectory(bridge, service)
        try printf(bridge, directory, "f", "old")
        let number = try lookup(bridge, directory, "f")
        let handle = try openHandle(bridge.open(number, flags: O_WRONLY, caller: opener))
        try write(bridge, handle, "new", at: 0)
        try expectSuccess(bridge.unlink(parent: directory, name: "f"))
        XCTAssertNil(try Keychain(service: service).item("f"))
        try expectSuccess(bridge.flush(handle: handle, caller: opener))
        XCTAssertNil(try Keychain(service: service).item("f"), "the close did not bring it back")
        try write(bridge, handle, "more", at: 0)
        try expectSuccess(bridge.release(handle: handle))
        XCTAssertNil(try Keychain(service: service).item("f"), "nor did the last close")
        XCTAssertEqual(try Keychain(service: service).allKeys(), [])
        assertErrno(.noSuchFileOrDirectory) { _ = try bridge.lookup(parent: directory, name: "f") }
    }

    func testRmOfANewFileBeforeItsFirstCloseSucceedsAndStoresNothing() throws {
        let service = KeyName(uniqueService())
        let bridge = makeBridge()
        let directory = try makeServiceDirectory(bridge, service)
        let (_, handle) = try create(bridge, directory, "draft")
        try write(bridge, handle, "unsaved", at: 0)
        try expectSuccess(bridge.unlink(parent: directory, name: "draft"))  // not ENOENT
        try expectSuccess(bridge.flush(handle: handle, caller: opener))
        try expectSuccess(bridge.release(handle: handle))
        XCTAssertNil(try Keychain(service: service).item("draft"))
        XCTAssertEqual(try Keychain(service: service).allKeys(), [])
        assertErrno(.noSuchFileOrDirectory) { _ = try bridge.lookup(parent: directory, name: "draft") }
    }

    func testMvOfAFileOpenForWritingStoresItsValueUnderTheNewName() throws {
        let service = KeyName(uniqueService())
        let bridge = makeBridge()
        let directory = try makeServiceDirectory(bridge, service)
        try printf(bridge, directory, "a", "old")
        let number = try lookup(bridge, directory, "a")
        let handle = try openHandle(bridge.open(number, flags: O_WRONLY | O_TRUNC, caller: opener))
        try write(bridge, handle, "moved", at: 0)
        try expectSuccess(bridge.rename(parent: directory, name: "a", newParent: directory, newName: "b", flags: 0))
        try expectSuccess(bridge.flush(handle: handle, caller: opener))
        try expectSuccess(bridge.release(handle: handle))
        XCTAssertEqual(try Keychain(service: service).string(forKey: "b"), "moved")
        XCTAssertNil(try Keychain(service: service).item("a"))
        XCTAssertEqual(try Keychain(service: service).allKeys(), ["b"])
    }

    func testMvOfANewFileBeforeItsFirstCloseStoresItUnderTheNewName() throws {
        let service = KeyName(uniqueService())
        let bridge = makeBridge()
        let directory = try makeServiceDirectory(bridge, service)
        let (_, handle) = try create(bridge, directory, "a.tmp")
        try write(bridge, handle, "fresh", at: 0)
        try expectSuccess(bridge.rename(parent: directory, name: "a.tmp", newParent: directory, newName: "a", flags: 0))
        try expectSuccess(bridge.flush(handle: handle, caller: opener))
        try expectSuccess(bridge.release(handle: handle))
        XCTAssertEqual(try Keychain(service: service).string(forKey: "a"), "fresh")
        XCTAssertNil(try Keychain(service: service).item("a.tmp"))
    }

    func testSavingAnItemThroughTheMountKeepsItsLevelAndDeadline() throws {
        let (service, deadline) = try makeTimedItem("k", "v1")
        let bridge = makeBridge()
        let directory = try lookup(bridge, InodeTable.rootNumber, service)
        try printf(bridge, directory, "k", "v2", truncating: lookup(bridge, directory, "k"))
        let keychain = try Keychain(service: service)
        XCTAssertEqual(try keychain.string(forKey: "k"), "v2")
        XCTAssertEqual(try keychain.item("k")?.accessibility, .afterFirstUnlock)
        assertDeadline(try keychain.deadline(forKey: "k"), near: deadline)
    }

    func testMvToANewNameKeepsTheItemsLevelAndDeadline() throws {
        let (service, deadline) = try makeTimedItem("k", "v1")
        let bridge = makeBridge()
        let directory = try lookup(bridge, InodeTable.rootNumber, service)
        _ = try lookup(bridge, directory, "k")
        try expectSuccess(bridge.rename(parent: directory, name: "k", newParent: directory, newName: "renamed", flags: 0))
        let keychain = try Keychain(service: service)
        XCTAssertNil(try keychain.item("k"))
        XCTAssertEqual(try keychain.string(forKey: "renamed"), "v1")
        XCTAssertEqual(try keychain.item("renamed")?.accessibility, .afterFirstUnlock)
        assertDeadline(try keychain.deadline(forKey: "renamed"), near: deadline)
    }

    func testRmThenCreateOfTheSameNameInheritsTheLevelAndDeadline() throws {
        let (service, deadline) = try makeTimedItem("k", "v1")
        let bridge = makeBridge()
        let directory = try lookup(bridge, InodeTable.rootNumber, service)
        _ = try lookup(bridge, directory, "k")
        try expectSuccess(bridge.unlink(parent: directory, name: "k"))
        XCTAssertNil(try Keychain(service: service).item("k"))
        let (number, handle) = try create(bridge, directory, "k")
        XCTAssertEqual(try xattr(bridge, number, "user.kc.access"), "after-first-unlock", "what it will be")
        try write(bridge, handle, "v3", at: 0)
        try expectSuccess(bridge.flush(handle: handle, caller: opener))
        try expectSuccess(bridge.release(handle: handle))
        let keychain = try Keychain(service: service)
        XCTAssertEqual(try keychain.string(forKey: "k"), "v3")
        XCTAssertEqual(try keychain.item("k")?.accessibility, .afterFirstUnlock)
        assertDeadline(try keychain.deadline(forKey: "k"), near: deadline)
    }

    func testSettingTheAccessAttributeMovesTheItemKeepingItsSerialAndDeadline() throws {
        let (service, deadline) = try makeTimedItem("k", "v1")
        let serial = try XCTUnwrap(Keychain(service: service).item("k")?.serial)
        let bridge = makeBridge()
        let directory = try lookup(bridge, InodeTable.rootNumber, service)
        let number = try lookup(bridge, directory, "k")
        XCTAssertEqual(try xattr(bridge, number, "user.kc.access"), "after-first-unlock")
        try expectSuccess(bridge.setxattr(number, name: "user.kc.access", value: "when-unlocked\n"))
        let keychain = try Keychain(service: service)
        let item = try XCTUnwrap(keychain.item("k"))
        XCTAssertEqual(item.accessibility, .whenUnlocked)
        XCTAssertEqual(item.serial, serial, "the same key moved")
        XCTAssertEqual(try keychain.string(forKey: "k"), "v1")
        assertDeadline(try keychain.deadline(forKey: "k"), near: deadline)
        XCTAssertEqual(try xattr(bridge, number, "user.kc.access"), "when-unlocked")
        XCTAssertEqual(try xattr(bridge, number, "user.kc.serial"), String(serial.rawValue))
    }

    func testTwoAppendingOpensNeverProduceAByteNobodyWrote() throws {
        let service = KeyName(uniqueService())
        let bridge = makeBridge()
        let directory = try makeServiceDirectory(bridge, service)
        try printf(bridge, directory, "log", "log:")
        let number = try lookup(bridge, directory, "log")
        let first = try openHandle(bridge.open(number, flags: O_WRONLY | O_APPEND, caller: opener))
        let second = try openHandle(bridge.open(number, flags: O_WRONLY | O_APPEND, caller: opener))
        try appendAlternately(bridge, number, [first, second])
        try expectSuccess(bridge.flush(handle: first, caller: opener))
        XCTAssertEqual(try Keychain(service: service).data(forKey: "log"), bytes("log:ACB"))
        try expectSuccess(bridge.flush(handle: second, caller: opener))
        XCTAssertEqual(try Keychain(service: service).data(forKey: "log"), bytes("log:BAC"))
        try expectSuccess(bridge.release(handle: first))
        try expectSuccess(bridge.release(handle: second))
        XCTAssertEqual(try Keychain(service: service).data(forKey: "log"), bytes("log:BAC"))
    }

    /// `echo A >> log` on a name that does not exist yet arrives as create (O_CREAT |
    /// O_APPEND), and a second `>>` while it is open as open(O_APPEND).
    func testAppendingOpenThatCreatesTheFileNeverProducesAByteNobodyWrote() throws {
        let service = KeyName(uniqueService())
        let bridge = makeBridge()
        let directory = try makeServiceDirectory(bridge, service)
        let (number, first) = try create(bridge, directory, "log", flags: O_WRONLY | O_CREAT | O_APPEND)
        try appendOnce(bridge, number, first, "A")
        XCTAssertEqual(try lookup(bridge, directory, "log"), number)
        let second = try openHandle(bridge.open(number, flags: O_WRONLY | O_APPEND, caller: opener))
        try appendOnce(bridge, number, second, "B")
        try appendOnce(bridge, number, first, "C")
        try expectSuccess(bridge.flush(handle: first, caller: opener))
        let stored = try XCTUnwrap(Keychain(service: service).data(forKey: "log"))
        XCTAssertFalse(stored.contains(0), "stored \(stored): a NUL byte nobody wrote")
        XCTAssertEqual(stored, bytes("AC"))
        try expectSuccess(bridge.release(handle: first))
        try expectSuccess(bridge.release(handle: second))
    }

    // MARK: - Helpers

    private func makeFilesystem() -> KeychainFilesystem {
        KeychainFilesystem(configuration: MountConfiguration(uid: getuid(), gid: getgid()))
    }

    private func makeBridge() -> FuseBridge { FuseBridge(filesystem: makeFilesystem()) }

    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    private func contents(_ pending: PendingWrite) -> [UInt8] { pending.read(offset: 0, count: 1 << 20) }

    /// A `room` check that always finds room.
    private static func anyRoom(_ checked: Int, _ size: Int) throws(FilesystemError) {}

    private func write(_ pending: PendingWrite, _ text: String, at offset: Int,
                       room: (Int, Int) throws(FilesystemError) -> Void = BridgeTests.anyRoom) throws {
        try write(pending, bytes(text), at: offset, room: room)
    }

    private func write(_ pending: PendingWrite, _ data: [UInt8], at offset: Int,
                       room: (Int, Int) throws(FilesystemError) -> Void = BridgeTests.anyRoom) throws {
        var failure: FilesystemError?
        data.withUnsafeBytes { buffer in
            do throws(FilesystemError) { try pending.write(buffer, offset: offset, room: room) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    private func assertErrno(_ expected: Errno, _ message: String = "", _ body: () throws -> Void,
                             file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try body(), message, file: file, line: line) { error in
            XCTAssertEqual(Errno(reporting: error), expected, "\(message): \(error)", file: file, line: line)
        }
    }

    private func assertDeadline(_ actual: Deadline?, near expected: Deadline, file: StaticString = #filePath, line: UInt = #line) {
        guard let actual else { return XCTFail("no deadline, expected one near \(expected.secondsSinceEpoch)", file: file, line: line) }
        XCTAssertLessThanOrEqual(abs(actual.secondsSinceEpoch - expected.secondsSinceEpoch), 1,
                                 "deadline \(actual.secondsSinceEpoch), expected \(expected.secondsSinceEpoch)", file: file, line: line)
    }

    /// An item at after-first-unlock with an hour's timeout, stored with the library.
    private func makeTimedItem(_ name: String, _ value: String, function: String = #function) throws -> (service: KeyName, deadline: Deadline) {
        let service = KeyName(uniqueService(function))
        try Keychain(service: service, accessibility: .afterFirstUnlock, timeout: .seconds(3600)).set(value, forKey: name)
        let deadline = try XCTUnwrap(Keychain(service: service).deadline(forKey: name))
        XCTAssertEqual(try Keychain(service: service).item(name)?.accessibility, .afterFirstUnlock)
        XCTAssertLessThanOrEqual(abs(deadline.secondsSinceEpoch - Deadline.fromNow(seconds: 3600).secondsSinceEpoch), 2)
        return (service, deadline)
    }

    /// A live process other than this one, for "another process closed it".
    private func spawnOtherProcess() throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sleep")
        process.arguments = ["120"]
        try process.run()
        addTeardownBlock {
            process.terminate()
            process.waitUntilExit()
        }
        XCTAssertNotEqual(process.processIdentifier, getpid())
        return process.processIdentifier
    }

    private func expectSuccess(_ reply: Reply, file: StaticString = #filePath, line: UInt = #line) {
        guard case .success = reply else { return XCTFail("expected success, got \(reply)", file: file, line: line) }
    }

    private struct UnexpectedReply: Error { var reply: String }

    private func entryNumber(_ reply: Reply) throws -> UInt64 {
        switch reply {
        case .entry(let number, _), .create(let number, _, _): return number
        default: throw UnexpectedReply(reply: "\(reply)")
        }
    }

    private func openHandle(_ reply: Reply) throws -> UInt64 {
        switch reply {
        case .open(let handle, _, _), .create(_, _, let handle): return handle
        default: throw UnexpectedReply(reply: "\(reply)")
        }
    }

    private func attributes(_ reply: Reply) throws -> NodeAttributes {
        switch reply {
        case .attributes(_, let attributes), .entry(_, let attributes), .create(_, let attributes, _): return attributes
        default: throw UnexpectedReply(reply: "\(reply)")
        }
    }

    private func lookup(_ bridge: FuseBridge, _ parent: UInt64, _ name: KeyName) throws -> UInt64 {
        try entryNumber(bridge.lookup(parent: parent, name: name))
    }

    /// `mkdir` of a new service at the mount's root.
    private func makeServiceDirectory(_ bridge: FuseBridge, _ service: KeyName) throws -> UInt64 {
        try entryNumber(bridge.mkdir(parent: InodeTable.rootNumber, name: service))
    }

    private func create(_ bridge: FuseBridge, _ directory: UInt64, _ name: KeyName,
                        flags: Int32 = O_WRONLY | O_CREAT | O_TRUNC) throws -> (number: UInt64, handle: UInt64) {
        let reply = try bridge.create(parent: directory, name: name, flags: flags, caller: opener)
        return (try entryNumber(reply), try openHandle(reply))
    }

    private func write(_ bridge: FuseBridge, _ handle: UInt64, _ text: String, at offset: Int) throws {
        try write(bridge, handle, bytes(text), at: offset)
    }

    private func write(_ bridge: FuseBridge, _ handle: UInt64, _ data: [UInt8], at offset: Int) throws {
        var result: Result<Reply, FilesystemError> = .failure(FilesystemError(.ioError))
        data.withUnsafeBytes { buffer in
            result = Result { () throws(FilesystemError) in try bridge.write(handle: handle, data: buffer, offset: offset) }
        }
        let reply = try result.get()
        guard case .written(let count) = reply, count == data.count else { throw UnexpectedReply(reply: "\(reply)") }
    }

    /// `printf value > name`: create (or with `truncating`, open O_TRUNC), write, close.
    private func printf(_ bridge: FuseBridge, _ directory: UInt64, _ name: KeyName, _ value: String, truncating number: UInt64? = nil) throws {
        let handle: UInt64
        if let number {
            handle = try openHandle(bridge.open(number, flags: O_WRONLY | O_TRUNC, caller: opener))
        } else {
            handle = try create(bridge, directory, name).handle
        }
        try write(bridge, handle, value, at: 0)
        try expectSuccess(bridge.flush(handle: handle, caller: opener))
        try expectSuccess(bridge.release(handle: handle))
    }

    private func readAll(_ bridge: FuseBridge, _ number: UInt64) throws -> [UInt8] {
        let handle = try openHandle(bridge.open(number, flags: O_RDONLY, caller: opener))
        defer { _ = bridge.release(handle: handle) }
        guard case .bytes(let data) = try bridge.read(handle: handle, size: 65536, offset: 0) else { throw UnexpectedReply(reply: "read") }
        return data
    }

    private func xattr(_ bridge: FuseBridge, _ number: UInt64, _ name: String) throws -> String {
        guard case .bytes(let data) = try bridge.getxattr(number, name: name, size: 256) else { throw UnexpectedReply(reply: "getxattr") }
        return String(decoding: data, as: UTF8.self)
    }

    /// One O_APPEND write as the kernel sends it: at the file size it last saw (stat
    /// shows the largest pending copy).
    private func appendOnce(_ bridge: FuseBridge, _ number: UInt64, _ handle: UInt64, _ text: String) throws {
        let size = try attributes(bridge.getattr(number)).size
        try write(bridge, handle, text, at: size)
    }

    /// "A", "B", "C" written in turn through the handles, taking turns.
    private func appendAlternately(_ bridge: FuseBridge, _ number: UInt64, _ handles: [UInt64]) throws {
        for (index, letter) in ["A", "B", "C", "A", "B", "C"].enumerated() {
            try appendOnce(bridge, number, handles[index % handles.count], letter)
        }
    }
}
