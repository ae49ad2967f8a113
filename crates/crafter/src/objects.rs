//! Creature behaviour: cows, zombies, skeletons, arrows and plants, with crafter's exact
//! random-draw order and its removed-object quirks (a creature removed in its own update
//! finishes that update: it still draws, attacks and shoots).

use super::rules::Material;
use super::world::{l1, toward, Kind, Object, Pos, World, DIRS, PLAYER};

impl World {
    /// `random_dir()`: one `randint(0, 4)`.
    fn random_dir(&mut self) -> Pos {
        DIRS[self.rng.randint(0, 4) as usize]
    }

    /// Run one object's `update()`.
    pub fn update_object(&mut self, id: u32) {
        match self.objects[id as usize].kind {
            Kind::Player => self.update_player(),
            Kind::Cow => self.update_cow(id),
            Kind::Zombie => self.update_zombie(id),
            Kind::Skeleton => self.update_skeleton(id),
            Kind::Arrow => self.update_arrow(id),
            Kind::Plant => self.update_plant(id),
        }
    }

    fn update_cow(&mut self, id: u32) {
        if self.health(id) <= 0 {
            self.remove(id);
        }
        if self.rng.next_double() < 0.5 {
            let d = self.random_dir();
            self.try_move(id, d, Material::walkable);
        }
    }

    fn update_zombie(&mut self, id: u32) {
        if self.health(id) <= 0 {
            self.remove(id);
        }
        let player = self.player_pos();
        let dist = l1(self.objects[id as usize].pos, player);
        if dist <= 8 && self.rng.next_double() < 0.9 {
            let long = self.rng.next_double() < 0.8;
            let d = toward(self.objects[id as usize].pos, player, long);
            self.try_move(id, d, Material::walkable);
        } else {
            let d = self.random_dir();
            self.try_move(id, d, Material::walkable);
        }
        let dist = l1(self.objects[id as usize].pos, self.player_pos());
        if dist <= 1 {
            let obj = &mut self.objects[id as usize];
            if obj.counter != 0 {
                obj.counter -= 1;
            } else {
                let damage = if self.player.sleeping { 7 } else { 2 };
                obj.counter = 5;
                let h = self.health(PLAYER);
                self.set_health(PLAYER, h - damage);
            }
        }
    }

    fn update_skeleton(&mut self, id: u32) {
        if self.health(id) <= 0 {
            self.remove(id);
        }
        let obj = &mut self.objects[id as usize];
        obj.counter = (obj.counter - 1).max(0);
        let player = self.player_pos();
        let dist = l1(self.objects[id as usize].pos, player);
        if dist <= 3 {
            let long = self.rng.next_double() < 0.6;
            let d = toward(self.objects[id as usize].pos, player, long);
            if self.try_move(id, [-d[0], -d[1]], Material::walkable) {
                return;
            }
        }
        if dist <= 5 && self.rng.next_double() < 0.5 {
            let pos = self.objects[id as usize].pos;
            let d = toward(pos, self.player_pos(), true);
            if self.objects[id as usize].counter > 0 || d == [0, 0] {
                return;
            }
            let target = [pos[0] + d[0], pos[1] + d[1]];
            if self.is_free(target, Material::arrow_walkable) {
                let mut arrow = Object::new(Kind::Arrow, target);
                arrow.facing = d;
                self.add(arrow);
                self.objects[id as usize].counter = 4;
            }
        } else if dist <= 8 && self.rng.next_double() < 0.3 {
            let long = self.rng.next_double() < 0.6;
            let d = toward(self.objects[id as usize].pos, self.player_pos(), long);
            self.try_move(id, d, Material::walkable);
        } else if self.rng.next_double() < 0.2 {
            let d = self.random_dir();
            self.try_move(id, d, Material::walkable);
        }
    }

    fn update_arrow(&mut self, id: u32) {
        let (pos, facing) = {
            let o = &self.objects[id as usize];
            (o.pos, o.facing)
        };
        let target = [pos[0] + facing[0], pos[1] + facing[1]];
        let hit = self.object_at(target);
        let material = self.material(target);
        if hit != 0 {
            let h = self.health(hit);
            self.set_health(hit, h - 2);
            self.remove(id);
        } else if !material.arrow_walkable() {
            self.remove(id);
            if matches!(material, Material::Table | Material::Furnace) {
                self.set_material(target, Material::Path);
            }
        } else {
            self.try_move(id, facing, Material::arrow_walkable);
        }
    }

    fn update_plant(&mut self, id: u32) {
        let pos = {
            let o = &mut self.objects[id as usize];
            o.counter += 1;
            o.pos
        };
        let threatened = DIRS.iter().any(|d| {
            let other = self.object_at([pos[0] + d[0], pos[1] + d[1]]);
            other != 0
                && matches!(
                    self.objects[other as usize].kind,
                    Kind::Zombie | Kind::Skeleton | Kind::Cow
                )
        });
        if threatened {
            let h = self.health(id);
            self.set_health(id, h - 1);
        }
        if self.health(id) <= 0 {
            self.remove(id);
        }
    }
}
