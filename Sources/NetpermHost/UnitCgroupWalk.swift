// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermIO
import NetpermProtocol

/// One scan's walk of the cgroup hierarchy (UnitCgroupScanner.scan): what it found and the descriptors it opened,
/// handed back to the scanner at its end, so that the scanner keeps only what lives between scans.
struct UnitCgroupWalk {
    typealias Found = UnitCgroupScanner.Found
    typealias Held = UnitCgroupScanner.Held
    typealias UnitPlace = UnitCgroupScanner.UnitPlace

    /// The scanner's descriptors from the last scan, by cgroup id: found again, they are not opened again.
    let held: [UInt64: Held]
    var problems: RateLimitedLog
    /// Every directory this walk found, by cgroup id.
    var seen: [UInt64: Held] = [:]
    var units: [UnitCgroup] = []
    var dirs: [Found] = []
    /// The user managers whose units are over the limit.
    var crowded: Set<String> = []

    init(held: [UInt64: Held], problems: RateLimitedLog) {
        self.held = held
        self.problems = problems
    }

    /// The hierarchy from its root: the top-level slices, and what they hold.
    mutating func walkRoot(_ top: Found) {
        dirs.append(top)
        for raw in list(top.fd) {
            let name = String(decoding: raw, as: UTF8.self)
            if UnitCgroups.isSlice(name), let slice = walked(top.fd, raw, name, unitLevel: 2) {
                walkSystem(slice.fd, name, level: 1)
            }
        }
    }

    /// The directory `raw` in `parent`: the descriptor already held for its id, or a new one. nil when it is
    /// gone, or cannot be opened (`why` then says so).
    mutating func open(_ parent: Int32, _ raw: [UInt8], unit: Bool) -> (Found?, Errno?) {
        let id: UInt64
        do {
            guard let i = try Directory.inode(at: parent, raw) else { return (nil, nil) }
            id = i
        } catch { return (nil, error == .notFound ? nil : error) }
        if let h = seen[id] ?? held[id] {
            seen[id] = h
            return (Found(id: id, fd: h.fd), nil)
        }
        let opened: Int32
        do { opened = try Directory.open(at: parent, raw) } catch { return (nil, error == .notFound ? nil : error) }
        // Held for as long as the cgroup lives: a number no select(2) needs (LowDescriptors).
        let fd = FD.moveAbove(opened, LowDescriptors.selectable)
        // The one opened is what counts: the name may have been made again in between.
        guard let own = try? Directory.inode(fd) else { FD.close(fd); return (nil, nil) }
        if let h = seen[own] ?? held[own] {
            FD.close(fd)
            seen[own] = h
            return (Found(id: own, fd: h.fd), nil)
        }
        seen[own] = Held(fd: fd, unit: unit)
        return (Found(id: own, fd: fd), nil)
    }
    /// A directory's entries' names (none when it is gone).
    func list(_ fd: Int32) -> [[UInt8]] { (try? Directory.entries(fd)) ?? [] }
    /// The directory `raw` in `parent`, added to those walked. `unitLevel`: the level of units made in it, if they
    /// are followed; `uid`: a user's tree's.
    mutating func walked(_ parent: Int32, _ raw: [UInt8], _ path: String, unitLevel: Int?,
                         uid: UInt32? = nil) -> Found? {
        let (found, error) = open(parent, raw, unit: false)
        if let error { problems.emit(4, "cgroups: cannot open \(SafeText.excerpt(path, maxBytes: 300)) (\(error)): "
            + "the units below it are not followed") }
        guard var found else { return nil }
        if let unitLevel, String(validating: raw, as: UTF8.self) != nil {
            found.place = UnitPlace(path: path, level: unitLevel, uid: uid)
        }
        dirs.append(found)
        return found
    }
    /// The unit cgroup `raw` in `parent`, at `level`, added to the units found.
    mutating func unit(_ parent: Int32, _ raw: [UInt8], _ path: String, _ name: String, level: Int, user: Bool) {
        let (found, error) = open(parent, raw, unit: true)
        if let found {
            units.append(UnitCgroup(path: path, level: level, unit: name, id: found.id, user: user, handle: found.fd))
            return
        }
        guard let error else { return }
        // Out of descriptors: a system unit is named by its path (a load may then fail if it goes meanwhile);
        // a user's unit, or a name that is not text, cannot be named safely and is left out.
        let text = String(validating: raw, as: UTF8.self) != nil
        if !user, text, let id = try? Directory.inode(at: parent, raw) {
            units.append(UnitCgroup(path: path, level: level, unit: name, id: id, user: user))
        }
        problems.emit(4, "cgroups: cannot open \(SafeText.excerpt(path, maxBytes: 300)) (\(error)): "
            + (!user && text ? "named to nft by its path" : "left out of the rules"))
    }
    /// A user manager's subtree: units, and slices holding units, down to the deepest user level, at most
    /// `maxUnitsPerUser` units in all.
    mutating func walkUser(_ fd: Int32, _ dir: String, level: Int, budget: inout Int, manager: String, uid: UInt32?) {
        for raw in list(fd) {
            let name = String(decoding: raw, as: UTF8.self)
            if UnitCgroups.isUnit(name) {
                guard budget > 0 else { crowded.insert(manager); continue }
                budget -= 1
                unit(fd, raw, dir + "/" + name, name, level: level, user: true)
            } else if UnitCgroups.isSlice(name), level < UnitCgroups.userLevels.last!,
                      let slice = walked(fd, raw, dir + "/" + name, unitLevel: level + 1, uid: uid) {
                walkUser(slice.fd, dir + "/" + name, level: level + 1, budget: &budget, manager: manager, uid: uid)
            }
        }
    }
    /// A system slice at `level`: its units, its slices, and (at level 2, `user.slice/user-UID.slice`) the user
    /// managers in it.
    mutating func walkSystem(_ fd: Int32, _ dir: String, level: Int) {
        for raw in list(fd) {
            let name = String(decoding: raw, as: UTF8.self)
            let path = dir + "/" + name
            if UnitCgroups.isMatchedUnit(name) {
                if UnitCgroups.levels.contains(level + 1) { unit(fd, raw, path, name, level: level + 1, user: false) }
            } else if UnitCgroups.isSlice(name) {
                if level + 1 < UnitCgroups.deepest, let slice = walked(fd, raw, path, unitLevel: level + 2) {
                    walkSystem(slice.fd, path, level: level + 1)
                }
            } else if level == 2, UnitCgroups.isUserManager(name) {
                let uid = Ruleset.UnitOwner.userUID(path: name)
                guard let manager = walked(fd, raw, path, unitLevel: uid == nil ? nil : 4, uid: uid) else { continue }
                var budget = UnitCgroupScanner.maxUnitsPerUser
                walkUser(manager.fd, path, level: 4, budget: &budget, manager: name, uid: uid)
            }
        }
    }
}
