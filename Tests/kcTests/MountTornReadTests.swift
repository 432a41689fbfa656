import Foundation
import KCTestSupport
import KernelKeychain
import XCTest

/// A reader through the mount sees an item's old value or its new one, whole, and never
/// anything else (DESIGN §6: `printf v > f` sets it, written on close, atomically). An
/// empty value is never stored (the writers here never write one), so a read that returns
/// nothing read something that was never the item (issue 35: one empty read in 10,000
/// to 60,000 with writers and readers racing on four items).
///
/// The readers are other processes (`cat`, bash): the test process holds the writer's
/// descriptor, and reads through the library only what it checks in the kernel.
final class MountTornReadTests: MountingTestCase {
    /// `cat PATH` in a child process.
    private func cat(_ path: String) throws -> CommandResult {
        try runCommand("/bin/cat", [path])
    }

    func testAReaderSeesTheOldValueWhileATruncatingWriterHasNotClosed() throws {
        let mount = try mount()
        let service = uniqueService()
        try Keychain(service: service).set("old-value", forKey: "k")
        let path = mount.file(service, "k")
        let (fd, openError) = FileOps.open(path, O_WRONLY | O_TRUNC)
        XCTAssertEqual(errnoName(openError), errnoName(0))
        guard fd >= 0 else { return }
        defer { _ = FileOps.close(fd) }

        var read = try cat(path)
        XCTAssertEqual(read.status, 0, "\(read)")
        XCTAssertEqual(read.output, "old-value", "open(O_TRUNC) empties nothing a reader sees")
        XCTAssertEqual(errnoName(FileOps.write(fd, "new-")), errnoName(0))
        read = try cat(path)
        XCTAssertEqual(read.output, "old-value", "half a write is not the value")
        XCTAssertEqual(errnoName(FileOps.write(fd, "value")), errnoName(0))
        XCTAssertEqual(errnoName(FileOps.close(fd)), errnoName(0))
        read = try cat(path)
        XCTAssertEqual(read.output, "new-value", "the writer's close stored the new value, whole")
    }

    /// The window the soak met: a writer's `open(O_CREAT | O_TRUNC)` of a name with no
    /// item (the first write of a new item, or the next after `rm`) and its close.
    /// The item does not exist until the close stores it, so a reader finds nothing
    /// there; it was served the writer's unstored copy, empty or half written.
    func testAFileBeingCreatedIsAbsentToOtherReadersUntilItsWriterCloses() throws {
        let (_, path, fd) = try creatorHalfWay(written: "")
        guard fd >= 0 else { return }
        defer { _ = FileOps.close(fd) }

        var read = try cat(path)
        XCTAssertNotEqual(read.status, 0, "a reader must not see the new file's empty copy: \(read)")
        XCTAssertEqual(read.output, "")
        XCTAssertTrue(read.standardError.contains("No such file or directory"), "\(read)")
        XCTAssertEqual(errnoName(FileOps.write(fd, "half-")), errnoName(0))
        read = try cat(path)
        XCTAssertNotEqual(read.status, 0, "nor half of its value: \(read)")
        XCTAssertEqual(read.output, "")
        XCTAssertEqual(errnoName(FileOps.write(fd, "value")), errnoName(0))
        XCTAssertEqual(errnoName(FileOps.close(fd)), errnoName(0))
        read = try cat(path)
        XCTAssertEqual(read.status, 0, "\(read)")
        XCTAssertEqual(read.output, "half-value")
    }

    /// A new file `new` in a new service of the mount, opened to be created
    /// (O_CREAT | O_TRUNC) and written only as far as `written`: the open descriptor (-1
    /// if the open failed, which fails the test) is the caller's to close.
    private func creatorHalfWay(written: String = "half-") throws -> (service: String, path: String, fd: Int32) {
        let mount = try mount()
        let service = uniqueService()
        XCTAssertEqual(errnoName(FileOps.mkdir(mount.file(service))), errnoName(0))
        let path = mount.file(service, "new")
        let (fd, openError) = FileOps.open(path, O_WRONLY | O_CREAT | O_TRUNC)
        XCTAssertEqual(errnoName(openError), errnoName(0))
        if fd >= 0, !written.isEmpty { XCTAssertEqual(errnoName(FileOps.write(fd, written)), errnoName(0)) }
        return (service, path, fd)
    }

    /// The same window on the writing side: `printf X >> f` (open(O_WRONLY | O_APPEND);
    /// the shell's O_CREAT finds the name there) while the creator of f has written
    /// only part of its value. An append adds to the stored value, and nothing is stored
    /// yet: the appender's close stores just its own bytes, as the new item the creator's
    /// close would have made (with the level set on the open file). The creator's bytes are
    /// not the item's, so the appender never starts from them; it stored "half-X", a
    /// value nobody wrote whole. The creator's close then stores its whole value over the
    /// append (the last close wins, as for two `printf v > f`).
    func testAnAppendToAFileBeingCreatedStoresNoneOfItsCreatorsUnstoredBytes() throws {
        let (service, path, fd) = try creatorHalfWay()
        guard fd >= 0 else { return }
        defer { _ = FileOps.close(fd) }
        let level = try runCommand("/usr/bin/setfattr", ["-n", "user.kc.access", "-v", "after-first-unlock", path])
        XCTAssertEqual(level.status, 0, "\(level)")

        let append = try runCommand("/bin/bash", ["-c", #"printf X >> "$1""#, "append", path])
        XCTAssertEqual(append.status, 0, "\(append)")
        let keychain = try Keychain(service: service)
        XCTAssertEqual(try keychain.string(forKey: "new"), "X", "the append starts from nothing stored, not from the creator's \"half-\"")
        XCTAssertEqual(try cat(path).output, "X")
        XCTAssertEqual(try keychain.item("new")?.accessibility, .afterFirstUnlock, "stored as the new item, at the level set on it")

        XCTAssertEqual(errnoName(FileOps.write(fd, "value")), errnoName(0))
        XCTAssertEqual(errnoName(FileOps.close(fd)), errnoName(0))
        XCTAssertEqual(try keychain.string(forKey: "new"), "half-value", "the creator's close stores its whole value")
        XCTAssertEqual(try keychain.item("new")?.accessibility, .afterFirstUnlock)
    }

    /// `1<> f` (open(O_RDWR), no truncation) overwrites in place what is stored; of a
    /// file being created that is nothing, so it stores what it wrote and no byte of
    /// the creator's (it stored "Yalf-").
    func testAReadWriteOpenOfAFileBeingCreatedStoresNoneOfItsCreatorsUnstoredBytes() throws {
        let (service, path, fd) = try creatorHalfWay()
        guard fd >= 0 else { return }
        defer { _ = FileOps.close(fd) }

        let overwrite = try runCommand("/bin/bash", ["-c", #"printf Y 1<> "$1""#, "overwrite", path])
        XCTAssertEqual(overwrite.status, 0, "\(overwrite)")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "new"), "Y", "nothing stored to keep but its own byte")

        XCTAssertEqual(errnoName(FileOps.write(fd, "value")), errnoName(0))
        XCTAssertEqual(errnoName(FileOps.close(fd)), errnoName(0))
        XCTAssertEqual(try Keychain(service: service).string(forKey: "new"), "half-value")
    }

    /// Real processes for three seconds: two writers (`printf v > f`, values that
    /// describe themselves), two readers (open, read to the end, close), and a remover
    /// (`rm -f`) that makes the writers create the items again and again. A reader may
    /// find an item absent; whatever it reads must be one whole written value.
    func testRacingWritersReadersAndARemoverReadOnlyWholeWrittenValues() throws {
        let mount = try mount()
        let service = uniqueService()
        XCTAssertEqual(errnoName(FileOps.mkdir(mount.file(service))), errnoName(0))
        let race = try runCommand("/bin/bash", ["-c", Self.raceScript, "race", mount.file(service), "3"])
        XCTAssertEqual(race.status, 0, "\(race)")
        let lines = race.output.split(separator: "\n")
        let wrong = lines.filter { $0.hasPrefix("wrong ") }
        XCTAssertEqual(wrong, [], "\(wrong.count) reads returned something no writer wrote whole")
        let reads = lines.filter { $0.hasPrefix("reads ") }.compactMap { $0.split(separator: " ").dropFirst().first.flatMap { Int($0) } }
        let whole = lines.filter { $0.hasPrefix("reads ") }.compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }
        XCTAssertEqual(reads.count, 2, "both readers reported: \(race)")
        XCTAssertGreaterThan(whole.reduce(0, +), 0, "the readers read values, not only absences: \(race)")
    }

    /// `bash -c SCRIPT race DIR SECONDS`. A value is `v<writer>.<n>.<n>`: empty, cut
    /// short or mixed, it no longer matches. Each reader prints `wrong '<value>'` per
    /// bad read and `reads <all> <absent> <whole>` at the end.
    private static let raceScript = #"""
        dir=$1
        end=$(( ${EPOCHREALTIME/./} + $2 * 1000000 ))
        running() { (( ${EPOCHREALTIME/./} < end )); }
        writer() {
            local n=0
            while running; do
                n=$((n + 1))
                printf 'v%s.%s.%s' "$1" "$n" "$n" > "$dir/item-$((n % 2))" 2>/dev/null
            done
        }
        remover() {
            local n=0
            while running; do
                n=$((n + 1))
                rm -f "$dir/item-$((n % 2))"
                sleep 0.02
            done
        }
        reader() {
            local n=0 absent=0 whole=0 value
            while running; do
                n=$((n + 1))
                if ! { exec 3< "$dir/item-$((n % 2))"; } 2>/dev/null; then
                    absent=$((absent + 1))
                    continue
                fi
                value=
                IFS= read -r -d '' value <&3
                exec 3<&-
                if [[ $value =~ ^v[0-9]+\.([0-9]+)\.([0-9]+)$ && ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" ]]; then
                    whole=$((whole + 1))
                else
                    printf "wrong '%s'\n" "$value"
                fi
            done
            echo "reads $n $absent $whole"
        }
        writer 1 & writer 2 & remover & reader & reader &
        wait
        """#
}
