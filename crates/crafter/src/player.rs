//! The player's update: action dispatch, collecting, placing, crafting, combat, life
//! statistics and health regeneration (crafter's `objects.Player`).

use super::rules::{
    ach, collect_rule, item, make_rule, place_rule, Action, Material, Placed, ITEM_MAX,
};
use super::world::{Kind, Object, Pos, World, PLAYER};

impl World {
    /// `Player.update()` with the action stored in `self.player.action`.
    pub(crate) fn update_player(&mut self) {
        let pos = self.player_pos();
        let facing = self.player.facing;
        let target = [pos[0] + facing[0], pos[1] + facing[1]];
        let material = self.material(target);
        let obj = self.object_at(target);
        let mut action = self.player.action;
        if self.player.sleeping {
            if self.player.inventory[item::ENERGY] < ITEM_MAX {
                action = Action::Sleep;
            } else {
                self.player.sleeping = false;
                self.player.achievements[ach::WAKE_UP] += 1;
            }
        }
        match action {
            Action::Noop => {}
            Action::MoveLeft => self.player_move([-1, 0]),
            Action::MoveRight => self.player_move([1, 0]),
            Action::MoveUp => self.player_move([0, -1]),
            Action::MoveDown => self.player_move([0, 1]),
            Action::Do if obj != 0 => self.do_object(obj),
            Action::Do => self.do_material(target, material),
            Action::Sleep => {
                if self.player.inventory[item::ENERGY] < ITEM_MAX {
                    self.player.sleeping = true;
                }
            }
            Action::PlaceStone | Action::PlaceTable | Action::PlaceFurnace | Action::PlacePlant => {
                self.place(action, target, material)
            }
            _ => self.make(action),
        }
        self.update_life_stats();
        self.degen_or_regen_health();
        for v in self.player.inventory.iter_mut() {
            *v = (*v).clamp(0, ITEM_MAX);
        }
        let health = self.player.inventory[item::HEALTH];
        if health < self.player.last_health {
            self.player.sleeping = false;
        }
        self.player.last_health = health;
    }

    fn player_move(&mut self, dir: Pos) {
        self.player.facing = dir;
        self.try_move(PLAYER, dir, Material::player_walkable);
        if self.material(self.player_pos()) == Material::Lava {
            self.set_health(PLAYER, 0);
        }
    }

    fn do_object(&mut self, obj: u32) {
        let inv = &self.player.inventory;
        let mut damage = 1;
        if inv[item::WOOD_SWORD] != 0 {
            damage = damage.max(2);
        }
        if inv[item::STONE_SWORD] != 0 {
            damage = damage.max(3);
        }
        if inv[item::IRON_SWORD] != 0 {
            damage = damage.max(5);
        }
        let kind = self.objects[obj as usize].kind;
        match kind {
            Kind::Plant => {
                if self.objects[obj as usize].ripe() {
                    self.objects[obj as usize].counter = 0;
                    self.player.inventory[item::FOOD] += 4;
                    self.player.achievements[ach::EAT_PLANT] += 1;
                }
            }
            Kind::Zombie | Kind::Skeleton | Kind::Cow => {
                let h = self.health(obj);
                self.set_health(obj, h - damage);
                if self.health(obj) <= 0 {
                    match kind {
                        Kind::Zombie => self.player.achievements[ach::DEFEAT_ZOMBIE] += 1,
                        Kind::Skeleton => self.player.achievements[ach::DEFEAT_SKELETON] += 1,
                        _ => {
                            self.player.inventory[item::FOOD] += 6;
                            self.player.achievements[ach::EAT_COW] += 1;
                            self.player.hunger = 0.0;
                        }
                    }
                }
            }
            Kind::Player | Kind::Arrow => {}
        }
    }

    fn do_material(&mut self, target: Pos, material: Material) {
        if material == Material::Water {
            self.player.thirst = 0.0;
        }
        let Some(rule) = collect_rule(material) else {
            return;
        };
        if let Some((slot, amount)) = rule.require {
            if self.player.inventory[slot] < amount {
                return;
            }
        }
        self.set_material(target, rule.leaves);
        if self.rng.next_double() <= rule.probability {
            self.player.inventory[rule.receive] += 1;
            self.player.achievements[rule.achievement] += 1;
        }
    }

    fn place(&mut self, action: Action, target: Pos, material: Material) {
        let Some(rule) = place_rule(action) else {
            return;
        };
        if self.object_at(target) != 0 || !(rule.allowed)(material) {
            return;
        }
        let (slot, amount) = rule.uses;
        if self.player.inventory[slot] < amount {
            return;
        }
        self.player.inventory[slot] -= amount;
        match rule.placed {
            Placed::Material(m) => self.set_material(target, m),
            Placed::Plant => {
                self.add(Object::new(Kind::Plant, target));
            }
        }
        self.player.achievements[rule.achievement] += 1;
    }

    fn make(&mut self, action: Action) {
        let Some(rule) = make_rule(action) else {
            return;
        };
        let [x, y] = self.player_pos();
        // numpy slice mat_map[x-1:x+2, y-1:y+2]: a start of -1 wraps around, giving nothing.
        let (mut table, mut furnace) = (false, false);
        if x >= 1 && y >= 1 {
            for i in x - 1..(x + 2).min(self.area[0]) {
                for j in y - 1..(y + 2).min(self.area[1]) {
                    match self.material([i, j]) {
                        Material::Table => table = true,
                        Material::Furnace => furnace = true,
                        _ => {}
                    }
                }
            }
        }
        if !table || (rule.needs_furnace && !furnace) {
            return;
        }
        if rule
            .uses
            .iter()
            .any(|&(slot, n)| self.player.inventory[slot] < n)
        {
            return;
        }
        for &(slot, n) in rule.uses {
            self.player.inventory[slot] -= n;
        }
        self.player.inventory[rule.gives] += 1;
        self.player.achievements[rule.achievement] += 1;
    }

    fn update_life_stats(&mut self) {
        let p = &mut self.player;
        p.hunger += if p.sleeping { 0.5 } else { 1.0 };
        if p.hunger > 25.0 {
            p.hunger = 0.0;
            p.inventory[item::FOOD] -= 1;
        }
        p.thirst += if p.sleeping { 0.5 } else { 1.0 };
        if p.thirst > 20.0 {
            p.thirst = 0.0;
            p.inventory[item::DRINK] -= 1;
        }
        if p.sleeping {
            p.fatigue = (p.fatigue - 1.0).min(0.0);
        } else {
            p.fatigue += 1.0;
        }
        if p.fatigue < -10.0 {
            p.fatigue = 0.0;
            p.inventory[item::ENERGY] += 1;
        }
        if p.fatigue > 30.0 {
            p.fatigue = 0.0;
            p.inventory[item::ENERGY] -= 1;
        }
    }

    fn degen_or_regen_health(&mut self) {
        let p = &mut self.player;
        let ok = p.inventory[item::FOOD] > 0
            && p.inventory[item::DRINK] > 0
            && (p.inventory[item::ENERGY] > 0 || p.sleeping);
        if ok {
            p.recover += if p.sleeping { 2.0 } else { 1.0 };
        } else {
            p.recover -= if p.sleeping { 0.5 } else { 1.0 };
        }
        if p.recover > 25.0 {
            p.recover = 0.0;
            let h = self.health(PLAYER);
            self.set_health(PLAYER, h + 1);
        } else if p.recover < -15.0 {
            p.recover = 0.0;
            let h = self.health(PLAYER);
            self.set_health(PLAYER, h - 1);
        }
    }
}
