//! vlm-eval's own 16×16 pixel art, used when crafter's textures are not available.
//!
//! Each sprite is 16 strings of 16 characters with a per-sprite palette mapping characters to
//! RGBA; `.` is transparent. Materials are opaque (RGB, or opaque RGBA where crafter's file is
//! RGBA); objects and icons are RGBA with transparent backgrounds. Mirrored and rotated
//! variants, the tools (one drawing, three palettes) and the digits are derived in code.

use super::Texture;

/// An RGBA colour.
type Rgba = [u8; 4];
/// Palette: character to colour.
type Palette = &'static [(char, Rgba)];
/// Sixteen rows of sixteen palette characters.
type Rows = [&'static str; 16];

/// A hand-drawn sprite.
struct Art {
    name: &'static str,
    channels: usize,
    palette: Palette,
    rows: &'static Rows,
}

/// Shorthand constructor for [`Art`].
const fn art(name: &'static str, channels: usize, palette: Palette, rows: &'static Rows) -> Art {
    Art {
        name,
        channels,
        palette,
        rows,
    }
}

/// Opaque colour.
const fn c(r: u8, g: u8, b: u8) -> Rgba {
    [r, g, b, 255]
}

const CLEAR: Rgba = [0, 0, 0, 0];

// ---------------------------------------------------------------------------------------------
// Materials.

const GRASS_PAL: Palette = &[
    ('G', c(86, 166, 64)),
    ('g', c(60, 130, 46)),
    ('l', c(132, 204, 90)),
];
const GRASS: Rows = [
    "GGGGGGGGGGGGGGGG",
    "GGGGGGlGGGGGGGGG",
    "GlGGGGlGGGGGGlGG",
    "GlGGGGgGGGlGGlGG",
    "GgGGGGGGGGlGGgGG",
    "GGGGGGGGGGgGGGGG",
    "GGGGlGGGGGGGGGGl",
    "GGlGlGGGGGGGlGGl",
    "GGlGgGGGGGGGlGGg",
    "GGgGGGGGGlGGgGGG",
    "GGGGGGGGlGlGGGGG",
    "GlGGGGGGlGlGGGGG",
    "GlGGGGGGgGgGGGlG",
    "GgGGGGGGGGGGGGlG",
    "GGGGGlGGGGGGGGgG",
    "GGGGGgGGGGGGGGGG",
];

const WATER_PAL: Palette = &[
    ('B', c(50, 102, 206)),
    ('w', c(130, 178, 242)),
    ('d', c(36, 80, 172)),
];
const WATER: Rows = [
    "BBBBBBBBBBBBBBBB",
    "BBBwwwBBBBBBBBBB",
    "BBwBBBwBBBBBBBBB",
    "BBBddBBBBBBBwwwB",
    "BBBBBBBBBBBwBBBw",
    "BBBBBBBBBBBBddBB",
    "BBBBBBwwwBBBBBBB",
    "BBBBBwBBBwBBBBBB",
    "wBBBBBBddBBBBBBB",
    "BwBBBBBBBBBBBBww",
    "BBddBBBBBBBBBBBB",
    "BBBBBBBBBBwwwBBB",
    "BBBBwwwBBwBBBwBB",
    "BBBwBBBwBBBddBBB",
    "BBBBddBBBBBBBBBB",
    "BBBBBBBBBBBBBBBB",
];

const STONE_PAL: Palette = &[
    ('S', c(128, 128, 130)),
    ('h', c(158, 158, 160)),
    ('k', c(86, 86, 90)),
];
const STONE: Rows = [
    "SSSSSSSSSSSSSSSS",
    "ShhSSSSSSkSSSSSS",
    "SSSSSSSSkSSShhSS",
    "SSSSkSSkSSSSSSSS",
    "SSSSSkkSSSSSSSkS",
    "SShSSSSSSShSSSkS",
    "SSSSSSSSSSSSSkSS",
    "kSSSShhSSSSSkSSS",
    "SkSSSSSSSSSSSSSS",
    "SSkkSSSSSkSSSSSS",
    "SSSSkSSSSSkSSShS",
    "SShSSSSSSSSkkSSS",
    "SSSSSSSSShSSSkSS",
    "SSSSkSSSSSSSSSSS",
    "SSSkSShhSSSSSShS",
    "SSSSSSSSSSSSSSSS",
];

const PATH_PAL: Palette = &[
    ('P', c(170, 150, 118)),
    ('q', c(146, 126, 98)),
    ('r', c(192, 174, 140)),
];
const PATH: Rows = [
    "PPPPPPPPPPPPPPPP",
    "PPqPPPPPPPrPPPPP",
    "PPPPPPrPPPPPPqPP",
    "PrPPPPPPPPPPPPPP",
    "PPPPqPPPPqPPPPrP",
    "PPPPPPPPPPPPPPPP",
    "PPPPPPPrPPPPqPPP",
    "PqPPPPPPPPPPPPPP",
    "PPPPPrPPPqPPPPPr",
    "PPPPPPPPPPPPPPPP",
    "PPrPPPPqPPPPrPPP",
    "PPPPPPPPPPPPPPPP",
    "PPPPqPPPPPrPPPqP",
    "PrPPPPPPPPPPPPPP",
    "PPPPPPPrPPPPqPPP",
    "PPPPPPPPPPPPPPPP",
];

const SAND_PAL: Palette = &[
    ('Y', c(228, 212, 152)),
    ('d', c(196, 176, 114)),
    ('l', c(244, 232, 182)),
];
const SAND: Rows = [
    "YYYYYYYYYYYYYYYY",
    "YYdYYYYYlYYYYYYY",
    "YYYYYYYYYYYYdYYY",
    "YlYYYdYYYYYYYYYY",
    "YYYYYYYYYYdYYYlY",
    "YYYdYYYlYYYYYYYY",
    "YYYYYYYYYYYYYdYY",
    "YdYYYYYYYdYYYYYY",
    "YYYYlYYYYYYYYYYY",
    "YYYYYYYdYYYYlYYY",
    "YYdYYYYYYYYYYYdY",
    "YYYYYYYYYlYYYYYY",
    "YYYYYdYYYYYYdYYY",
    "YlYYYYYYYYYYYYYY",
    "YYYYYYYYdYYYYlYY",
    "YYYdYYYYYYYYYYYY",
];

const TREE_PAL: Palette = &[
    ('G', c(86, 166, 64)),
    ('g', c(60, 130, 46)),
    ('L', c(34, 110, 40)),
    ('l', c(58, 146, 54)),
    ('D', c(22, 78, 30)),
    ('T', c(112, 76, 42)),
    ('t', c(82, 54, 30)),
];
const TREE: Rows = [
    "GGGGGLLLLLLGGGGG",
    "GGGLLLlLLLLLLGGG",
    "GGLLlllLLLLlLLGG",
    "GLLlllLLLLllLLLG",
    "GLLLlLLLLLLLLDLG",
    "LLLLLLLLlLLLLDLL",
    "LLlLLLLlllLLDDLL",
    "LlllLLLLlLLLDLLL",
    "GLLLLDLLLLLDDLLG",
    "GLLDDDLLLDDDLLLG",
    "GGLLLDDTTDDLLLGG",
    "GGGGLLLTtLLLGGGG",
    "GGGGGGTTtGGGGGGG",
    "GGgGGGTTtGGGGgGG",
    "GGGGGTTTttGGGGGG",
    "GGGGGGGGGGGGGGGG",
];

const LAVA_PAL: Palette = &[
    ('O', c(232, 104, 24)),
    ('R', c(186, 40, 18)),
    ('Y', c(255, 204, 48)),
];
const LAVA: Rows = [
    "OOOORROOOOOOOYYO",
    "OYYOORROOOOOYYOO",
    "YYOOOORRROOOYOOO",
    "YOOOOOOORRROOOOR",
    "OOOOYYOOOOORROOR",
    "RROOYYYOOOOOOORR",
    "ORRROOYYOOOOORRO",
    "OOORRROOOOYYORRO",
    "OOOOORROOYYYYROO",
    "OYYOOORROOYYOOOO",
    "YYYOOOOORROOOOYY",
    "OYOOOOOOORRROYYO",
    "OOORRROOOOOORROO",
    "ORRROOOYYOOOORRO",
    "RROOOOYYYYOOOORR",
    "OOOOOOOYYOOOOOOO",
];

const COAL_PAL: Palette = &[
    ('S', c(128, 128, 130)),
    ('h', c(158, 158, 160)),
    ('k', c(86, 86, 90)),
    ('K', c(24, 24, 26)),
    ('j', c(58, 58, 62)),
];
const COAL: Rows = [
    "SSSSSSSSSSSSSSSS",
    "ShhSSSSSSkSSSSSS",
    "SSSKKjSSSSSSKKSS",
    "SSKKKKjSSSSKKKjS",
    "SSKKKKSSSSSKKKKS",
    "SShKKSSSSSSSKKSS",
    "SSSSSSSSSSSSSkSS",
    "kSSSShKKjSSSkSSS",
    "SkSSSKKKKjSSSSSS",
    "SSkkSKKKKKSSSSSS",
    "SSSSSSKKKSSSSShS",
    "SShSSSSSSSSKKjSS",
    "SKKjSSSSShSKKKKS",
    "KKKKjSSSSSSSKKSS",
    "SKKKSShhSSSSSShS",
    "SSSSSSSSSSSSSSSS",
];

const IRON_PAL: Palette = &[
    ('S', c(128, 128, 130)),
    ('h', c(158, 158, 160)),
    ('k', c(86, 86, 90)),
    ('A', c(222, 170, 120)),
    ('a', c(184, 112, 64)),
];
const IRON: Rows = [
    "SSSSSSSSSSSSSSSS",
    "ShhSSSSSSkSSSSSS",
    "SSSSAaSSkSSSAaSS",
    "SSSAaaSkSSSAaaSS",
    "SSSSaSkSSSSSaSkS",
    "SShSSSSSSShSSSkS",
    "SSSSSSSSSSSSSkSS",
    "kSSSSSAaSSSSkSSS",
    "SkSSSAaaaSSSSSSS",
    "SSkkSSaaSkSSSSSS",
    "SSSSkSSSSSkSSShS",
    "SAaSSSSSSSSkAaSS",
    "AaaSSSSSShSAaaSS",
    "SaSSkSSSSSSSaSSS",
    "SSSkSShhSSSSSShS",
    "SSSSSSSSSSSSSSSS",
];

const DIAMOND_PAL: Palette = &[
    ('S', c(128, 128, 130)),
    ('h', c(158, 158, 160)),
    ('k', c(86, 86, 90)),
    ('W', c(236, 255, 255)),
    ('C', c(90, 226, 236)),
    ('c', c(40, 170, 190)),
];
const DIAMOND: Rows = [
    "SSSSSSSSSSSSSSSS",
    "ShhSSSSSSkSSSSSS",
    "SSSSWSSSkSSSSSSS",
    "SSSWCCSkSSSSSWSS",
    "SSSCCcSSSSSSWCCS",
    "SShScSSSSShSCCcS",
    "SSSSSSSSSSSSScSS",
    "kSSSSSSWSSSSkSSS",
    "SkSSSSWCCSSSSSSS",
    "SSkkSSCCcSSSSSSS",
    "SSSSkSScSSkSSShS",
    "SShSSSSSSSSkWSSS",
    "SSWSSSSSShSWCCSS",
    "SWCCSSSSSSSCCcSS",
    "SCCcSShhSSSScSSS",
    "SScSSSSSSSSSSSSS",
];

const TABLE_PAL: Palette = &[
    ('D', c(92, 58, 28)),
    ('W', c(176, 124, 70)),
    ('w', c(150, 102, 54)),
    ('g', c(120, 120, 126)),
    ('G', c(178, 178, 186)),
    ('h', c(110, 72, 38)),
];
const TABLE: Rows = [
    "DDDDDDDDDDDDDDDD",
    "DWWWWWWWWWWWWWWD",
    "DWWWWWWWWWWWGGWD",
    "DwwwwwwwwwwwGGwD",
    "DWWDWWWDWWWWhWWD",
    "DWWDWWWDWWWWhWWD",
    "DDDDDDDDDDDDhDDD",
    "DWWDWWWDWWWWhWWD",
    "DWWDWWWDWWWWWWWD",
    "DwwDwwwDwwwwwwwD",
    "DDDDDDDDDDDDDDDD",
    "DDhhDDDDDDDDhhDD",
    "DDhhDDDDDDDDhhDD",
    "DDhhDDDDDDDDhhDD",
    "DDhhDDDDDDDDhhDD",
    "DDDDDDDDDDDDDDDD",
];

const FURNACE_PAL: Palette = &[
    ('S', c(120, 120, 124)),
    ('h', c(156, 156, 160)),
    ('m', c(84, 84, 88)),
    ('K', c(28, 24, 24)),
    ('O', c(240, 120, 30)),
    ('Y', c(255, 214, 64)),
    ('R', c(196, 48, 24)),
];
const FURNACE: Rows = [
    "mmmmmmmmmmmmmmmm",
    "mhhhhmhhhhhhmhhm",
    "mSSSSmSSSSSSmSSm",
    "mmmmmmmmmmmmmmmm",
    "mhhmhhhhhhmhhhhm",
    "mSSmKKKKKKKKSSSm",
    "mmmKKKKKKKKKKmmm",
    "mhhKKKKKKKKKKhhm",
    "mSSKKKKOKKKKKSSm",
    "mmmKKKOYOKOKKmmm",
    "mhhKKOYYOOYOKhhm",
    "mSSKROYYYOYORSSm",
    "mmmKRROOOOORRmmm",
    "mhhhhhmhhhhmhhhm",
    "mSSSSSmSSSSmSSSm",
    "mmmmmmmmmmmmmmmm",
];

const UNKNOWN_PAL: Palette = &[('M', c(255, 0, 255)), ('K', c(0, 0, 0))];
const UNKNOWN: Rows = [
    "MMMMKKKKMMMMKKKK",
    "MMMMKKKKMMMMKKKK",
    "MMMMKKKKMMMMKKKK",
    "MMMMKKKKMMMMKKKK",
    "KKKKMMMMKKKKMMMM",
    "KKKKMMMMKKKKMMMM",
    "KKKKMMMMKKKKMMMM",
    "KKKKMMMMKKKKMMMM",
    "MMMMKKKKMMMMKKKK",
    "MMMMKKKKMMMMKKKK",
    "MMMMKKKKMMMMKKKK",
    "MMMMKKKKMMMMKKKK",
    "KKKKMMMMKKKKMMMM",
    "KKKKMMMMKKKKMMMM",
    "KKKKMMMMKKKKMMMM",
    "KKKKMMMMKKKKMMMM",
];

// ---------------------------------------------------------------------------------------------
// Creatures.

const PERSON_PAL: Palette = &[
    ('.', CLEAR),
    ('h', c(96, 60, 28)),
    ('s', c(238, 190, 150)),
    ('e', c(24, 24, 40)),
    ('m', c(190, 110, 96)),
    ('t', c(52, 112, 196)),
    ('T', c(36, 82, 150)),
    ('d', c(66, 44, 24)),
    ('p', c(112, 84, 52)),
    ('f', c(48, 36, 24)),
    ('b', c(210, 60, 60)),
    ('B', c(160, 40, 44)),
    ('w', c(240, 240, 240)),
    ('z', c(200, 230, 255)),
];
const PLAYER_DOWN: Rows = [
    "................",
    ".....hhhhhh.....",
    "....hhhhhhhh....",
    "....hssssssh....",
    "....ssessess....",
    "....ssssssss....",
    ".....ssmmss.....",
    "...TttttttttT...",
    "..tTttttttttTt..",
    "..ttTttttttTtt..",
    "..ssddddddddss..",
    "....pppppppp....",
    "....pppppppp....",
    "....ppp..ppp....",
    "....ppp..ppp....",
    "...fff....fff...",
];
const PLAYER_UP: Rows = [
    "................",
    ".....hhhhhh.....",
    "....hhhhhhhh....",
    "....hhhhhhhh....",
    "....hhhhhhhh....",
    "....shhhhhhs....",
    ".....ssssss.....",
    "...TttttttttT...",
    "..tTttttttttTt..",
    "..ttTttttttTtt..",
    "..ssddddddddss..",
    "....pppppppp....",
    "....pppppppp....",
    "....ppp..ppp....",
    "....ppp..ppp....",
    "...fff....fff...",
];
const PLAYER_LEFT: Rows = [
    "................",
    ".....hhhhhh.....",
    "....hhhhhhhh....",
    "....sssshhhh....",
    "....sesshhhh....",
    "...sssssshhh....",
    "....smsssh......",
    ".....TtttT......",
    ".....ttttT......",
    "...sstttTt......",
    ".....ddddd......",
    ".....ppppp......",
    ".....ppppp......",
    ".....pp.pp......",
    ".....pp.pp......",
    "....fff.fff.....",
];
const PLAYER_SLEEP: Rows = [
    "................",
    "...........zzz..",
    ".............z..",
    "............z...",
    "...........zzz..",
    "................",
    "................",
    "..hhhh..........",
    ".hhssshBBBBBBBB.",
    ".hhsesbbbbbbbbbB",
    "whhsssbbbbbbbbbB",
    "wwhhssbbbbbbbbbB",
    "wwwwwwbbbbbbbbbB",
    ".wwwwwBBBBBBBBBB",
    "................",
    "................",
];

const COW_PAL: Palette = &[
    ('.', CLEAR),
    ('W', c(244, 240, 232)),
    ('B', c(110, 70, 40)),
    ('b', c(80, 50, 28)),
    ('n', c(236, 160, 160)),
    ('e', c(20, 20, 20)),
    ('h', c(220, 210, 170)),
    ('k', c(60, 40, 24)),
];
const COW: Rows = [
    "................",
    "................",
    "................",
    ".h..h...........",
    ".BBBB...........",
    "BeBBeB..........",
    "BBBBBBWWBBWWWWb.",
    "BBBBBWWBBBWWBBWb",
    ".nnnWWWWBBWWBBWW",
    ".nenWWWWWWWWWWWW",
    "..nnBBWWWWWBBWWW",
    "....BBBWWWWBBBWW",
    "....WW.WW..WW.WW",
    "....WW.WW..WW.WW",
    "....kk.kk..kk.kk",
    "................",
];

const ZOMBIE_PAL: Palette = &[
    ('.', CLEAR),
    ('g', c(104, 176, 88)),
    ('G', c(70, 130, 60)),
    ('e', c(200, 30, 30)),
    ('K', c(30, 40, 30)),
    ('t', c(70, 96, 120)),
    ('T', c(48, 70, 92)),
    ('p', c(56, 60, 90)),
];
const ZOMBIE: Rows = [
    "................",
    ".....GGGGGG.....",
    "....GggggggG....",
    "....gggggggg....",
    "....geKggKeg....",
    "....gggggggg....",
    ".....gKKKKg.....",
    "ggGtttttttttGgg.",
    "ggGttTtttTttGgg.",
    "....tTtttTtt....",
    "....ttttt.tt....",
    "....ppppppp.....",
    "....ppp..pp.....",
    "....ppp..gg.....",
    "....gg...gg.....",
    "...GGG...GGG....",
];

const SKELETON_PAL: Palette = &[
    ('.', CLEAR),
    ('W', c(236, 236, 228)),
    ('w', c(180, 180, 172)),
    ('K', c(24, 24, 24)),
    ('b', c(130, 86, 44)),
    ('s', c(220, 220, 220)),
];
const SKELETON: Rows = [
    "................",
    ".....WWWWWW.....",
    "....WWWWWWWW.b..",
    "....WKKWWKKW.bs.",
    "....WKKWWKKW..bs",
    "....WWWwwWWW..bs",
    ".....WKWKWW...bs",
    "......wWWw....bs",
    "...WWWWWWWWWW.bs",
    "...W.WwWWwW.WWbs",
    "...W..WWWW...bs.",
    "...w.wwWWww..b..",
    "......W..W......",
    "......W..W......",
    "......W..W......",
    ".....WW..WW.....",
];

const ARROW_PAL: Palette = &[
    ('.', CLEAR),
    ('a', c(176, 180, 190)),
    ('A', c(110, 114, 124)),
    ('w', c(150, 104, 58)),
    ('f', c(236, 236, 236)),
    ('r', c(210, 60, 50)),
];
const ARROW_RIGHT: Rows = [
    "................",
    "................",
    "................",
    "................",
    "................",
    "ff.........a....",
    ".ff........aa...",
    "..rwwwwwwwwaaaA.",
    "..rwwwwwwwwaaaA.",
    ".ff........aa...",
    "ff.........a....",
    "................",
    "................",
    "................",
    "................",
    "................",
];

// ---------------------------------------------------------------------------------------------
// Plants.

const PLANT_PAL: Palette = &[
    ('.', CLEAR),
    ('L', c(70, 170, 60)),
    ('l', c(120, 210, 90)),
    ('D', c(40, 110, 40)),
    ('s', c(60, 130, 44)),
    ('d', c(110, 78, 46)),
    ('R', c(220, 40, 40)),
    ('r', c(255, 150, 130)),
    ('Y', c(250, 210, 40)),
];
const PLANT: Rows = [
    "................",
    "................",
    "................",
    "................",
    "................",
    "................",
    ".......ll.......",
    "..LLl..Ls..lLL..",
    ".LLLLL.s..LLLLL.",
    "..DLLLLs.LLLLD..",
    "....DDLsLLDD....",
    ".......s........",
    ".......s........",
    ".....ddsddd.....",
    "....dddddddd....",
    "................",
];
const PLANT_RIPE: Rows = [
    "................",
    ".......ll.......",
    "......lLLl......",
    "..LLl..Ls..lLL..",
    ".LLLLL.s..LLLLL.",
    "..DLLLLsLLLLLD..",
    "...DDLssLLDD....",
    "..RR..Ls..YY....",
    ".RrRR.s..YYYY...",
    ".RRRR.sL.YYYY...",
    "..RR.LsLL.YY....",
    "....LLs.LL.RR...",
    "......s...RrRR..",
    ".....dsddRRRR...",
    "....dddddddRR...",
    "................",
];

// ---------------------------------------------------------------------------------------------
// Inventory icons.

const HEALTH_PAL: Palette = &[
    ('.', CLEAR),
    ('R', c(220, 36, 48)),
    ('r', c(160, 20, 32)),
    ('w', c(255, 190, 190)),
    ('K', c(80, 10, 16)),
];
const HEALTH: Rows = [
    "................",
    "................",
    "...KKK....KKK...",
    "..KRRRK..KRRRK..",
    ".KRwwRRKKRRRRRK.",
    ".KRwRRRRRRRRRRK.",
    ".KRRRRRRRRRRRRK.",
    ".KRRRRRRRRRRRrK.",
    "..KRRRRRRRRRrK..",
    "...KRRRRRRRrK...",
    "....KRRRRRrK....",
    ".....KRRRrK.....",
    "......KRrK......",
    ".......KK.......",
    "................",
    "................",
];

const FOOD_PAL: Palette = &[
    ('.', CLEAR),
    ('M', c(176, 84, 48)),
    ('m', c(126, 56, 32)),
    ('l', c(214, 128, 80)),
    ('W', c(244, 240, 228)),
    ('w', c(196, 190, 176)),
];
const FOOD: Rows = [
    "................",
    "................",
    ".......MMMM.....",
    ".....MMlllMMm...",
    "....MMllMMMMMm..",
    "....MlMMMMMMMm..",
    "...MMlMMMMMMmm..",
    "...MMMMMMMMMm...",
    "...mMMMMMMMmm...",
    "....mMMMMMmm....",
    ".....mmmWmm.....",
    "......wWW.......",
    ".....wWw........",
    "..WWwWw.........",
    "..WWw...........",
    "...w............",
];

const DRINK_PAL: Palette = &[
    ('.', CLEAR),
    ('B', c(50, 120, 230)),
    ('b', c(30, 80, 180)),
    ('w', c(190, 225, 255)),
    ('K', c(20, 40, 100)),
];
const DRINK: Rows = [
    "................",
    ".......KK.......",
    "......KBBK......",
    "......KBBK......",
    ".....KBBBBK.....",
    ".....KBBBBK.....",
    "....KBwBBBBK....",
    "....KBwBBBBK....",
    "...KBwBBBBBBK...",
    "...KBwBBBBBBK...",
    "...KBBBBBBBbK...",
    "...KBBBBBBBbK...",
    "....KBBBBBbK....",
    ".....KbbbbK.....",
    "......KKKK......",
    "................",
];

const ENERGY_PAL: Palette = &[
    ('.', CLEAR),
    ('Y', c(255, 220, 40)),
    ('y', c(220, 160, 20)),
    ('K', c(110, 70, 0)),
];
const ENERGY: Rows = [
    "................",
    "........KKKK....",
    ".......KYYYK....",
    "......KYYYK.....",
    ".....KYYYK......",
    "....KYYYK.......",
    "...KYYYYKKKK....",
    "...KYYYYYYYK....",
    "....KKKKYYyK....",
    ".......KYyK.....",
    "......KYyK......",
    ".....KYyK.......",
    "....KYyK........",
    "....KyK.........",
    "....KK..........",
    "................",
];

const SAPLING_PAL: Palette = &[
    ('.', CLEAR),
    ('L', c(90, 190, 70)),
    ('l', c(150, 225, 110)),
    ('D', c(44, 120, 44)),
    ('s', c(90, 120, 40)),
    ('d', c(120, 84, 48)),
];
const SAPLING: Rows = [
    "................",
    "................",
    "................",
    ".........LLL....",
    "........LlLLL...",
    "........LLLLD...",
    "...LLL..LLDD....",
    "..LLlLL.sD......",
    "..LLLLDDs.......",
    "...DDD.s........",
    ".......s........",
    ".......s........",
    ".......s........",
    ".....ddddd......",
    "....ddddddd.....",
    "................",
];

const WOOD_PAL: Palette = &[
    ('.', CLEAR),
    ('B', c(110, 72, 36)),
    ('b', c(80, 50, 24)),
    ('L', c(214, 176, 120)),
    ('r', c(170, 130, 80)),
];
const WOOD: Rows = [
    "................",
    "................",
    "................",
    "................",
    "..bbbbbbbbbLLL..",
    ".bBBBBBBBBLLrLL.",
    ".bBbBBBBbBLrLrL.",
    ".bBBBBbBBBLrLrL.",
    ".bBBBBBBBBLrLrL.",
    ".bBbBBBBbBLLrLL.",
    ".bBBBBBBBBBLLL..",
    "..bbbbbbbbbb....",
    "................",
    "................",
    "................",
    "................",
];

/// Pickaxe drawing; `H`/`h`/`k` (head light/mid/dark) get the material's palette.
const PICKAXE: Rows = [
    "................",
    "................",
    "....hhhhh.......",
    "...HHHHHHhh.....",
    "..hk....kHHh....",
    "..k......wHh....",
    ".........wkHh...",
    "........w..kHh..",
    ".......w....kh..",
    "......w......k..",
    ".....w..........",
    "....w...........",
    "...w............",
    "..w.............",
    ".w..............",
    "................",
];

/// Sword drawing; `H`/`h`/`k` (blade light/mid/dark) get the material's palette.
const SWORD: Rows = [
    "................",
    "...........kHH..",
    "..........kHHh..",
    ".........kHHhk..",
    "........kHHhk...",
    ".......kHHhk....",
    "......kHHhk.....",
    "..g..kHHhk......",
    "..gg.HHhk.......",
    "...gghhk........",
    "....ggg.........",
    "...w.ggg........",
    "..w...gg........",
    ".ww....g........",
    "pw..............",
    "................",
];

/// Handle colours shared by all tools.
const fn tool_palette(light: Rgba, mid: Rgba, dark: Rgba) -> [(char, Rgba); 7] {
    [
        ('.', CLEAR),
        ('H', light),
        ('h', mid),
        ('k', dark),
        ('w', c(142, 96, 52)),
        ('g', c(100, 68, 36)),
        ('p', c(90, 60, 32)),
    ]
}
const WOOD_TOOL: [(char, Rgba); 7] =
    tool_palette(c(214, 172, 110), c(176, 130, 74), c(120, 84, 44));
const STONE_TOOL: [(char, Rgba); 7] =
    tool_palette(c(170, 170, 172), c(128, 128, 132), c(84, 84, 90));
const IRON_TOOL: [(char, Rgba); 7] =
    tool_palette(c(250, 250, 255), c(206, 212, 222), c(140, 150, 166));

/// Every hand-drawn sprite.
const ART: &[Art] = &[
    art("grass", 3, GRASS_PAL, &GRASS),
    art("water", 3, WATER_PAL, &WATER),
    art("stone", 3, STONE_PAL, &STONE),
    art("path", 4, PATH_PAL, &PATH),
    art("sand", 3, SAND_PAL, &SAND),
    art("tree", 3, TREE_PAL, &TREE),
    art("lava", 3, LAVA_PAL, &LAVA),
    art("coal", 4, COAL_PAL, &COAL),
    art("iron", 3, IRON_PAL, &IRON),
    art("diamond", 4, DIAMOND_PAL, &DIAMOND),
    art("table", 4, TABLE_PAL, &TABLE),
    art("furnace", 3, FURNACE_PAL, &FURNACE),
    art("unknown", 4, UNKNOWN_PAL, &UNKNOWN),
    art("player-down", 4, PERSON_PAL, &PLAYER_DOWN),
    art("player-up", 4, PERSON_PAL, &PLAYER_UP),
    art("player-left", 4, PERSON_PAL, &PLAYER_LEFT),
    art("player-sleep", 4, PERSON_PAL, &PLAYER_SLEEP),
    art("cow", 4, COW_PAL, &COW),
    art("zombie", 4, ZOMBIE_PAL, &ZOMBIE),
    art("skeleton", 4, SKELETON_PAL, &SKELETON),
    art("arrow-right", 4, ARROW_PAL, &ARROW_RIGHT),
    art("plant", 4, PLANT_PAL, &PLANT),
    art("plant-ripe", 4, PLANT_PAL, &PLANT_RIPE),
    art("health", 4, HEALTH_PAL, &HEALTH),
    art("food", 4, FOOD_PAL, &FOOD),
    art("drink", 4, DRINK_PAL, &DRINK),
    art("energy", 4, ENERGY_PAL, &ENERGY),
    art("sapling", 4, SAPLING_PAL, &SAPLING),
    art("wood", 4, WOOD_PAL, &WOOD),
    art("wood_pickaxe", 4, &WOOD_TOOL, &PICKAXE),
    art("stone_pickaxe", 4, &STONE_TOOL, &PICKAXE),
    art("iron_pickaxe", 4, &IRON_TOOL, &PICKAXE),
    art("wood_sword", 4, &WOOD_TOOL, &SWORD),
    art("stone_sword", 4, &STONE_TOOL, &SWORD),
    art("iron_sword", 4, &IRON_TOOL, &SWORD),
];

/// 3×5 digit glyphs, `#` = ink, rows top to bottom.
const DIGITS: [[&str; 5]; 9] = [
    [".#.", "##.", ".#.", ".#.", "###"],
    ["###", "..#", "###", "#..", "###"],
    ["###", "..#", ".##", "..#", "###"],
    ["#.#", "#.#", "###", "..#", "..#"],
    ["###", "#..", "###", "..#", "###"],
    ["###", "#..", "###", "#.#", "###"],
    ["###", "..#", "..#", "..#", "..#"],
    ["###", "#.#", "###", "#.#", "###"],
    ["###", "#.#", "###", "..#", "###"],
];

/// Pixel widths of the glyph columns and heights of the glyph rows.
const GLYPH_COLS: [usize; 3] = [3, 3, 3];
const GLYPH_ROWS: [usize; 5] = [3, 2, 3, 2, 3];

/// Build one hand-drawn sprite. Panics on malformed art (caught by the unit tests).
fn render(art: &Art) -> Texture {
    let mut data = Vec::with_capacity(16 * 16 * art.channels);
    for (y, row) in art.rows.iter().enumerate() {
        assert_eq!(
            row.chars().count(),
            16,
            "{} row {y} is not 16 wide",
            art.name
        );
        for ch in row.chars() {
            let (_, rgba) = art
                .palette
                .iter()
                .find(|(k, _)| *k == ch)
                .unwrap_or_else(|| panic!("{}: '{ch}' is not in the palette", art.name));
            if art.channels == 3 {
                assert_eq!(rgba[3], 255, "{}: RGB sprites must be opaque", art.name);
            }
            data.extend_from_slice(&rgba[..art.channels]);
        }
    }
    Texture {
        width: 16,
        height: 16,
        channels: art.channels,
        data,
    }
}

/// Map each output pixel (x, y) to a source pixel of a 16×16 texture.
fn remap(t: &Texture, src: impl Fn(usize, usize) -> (usize, usize)) -> Texture {
    let mut data = Vec::with_capacity(t.data.len());
    for y in 0..16 {
        for x in 0..16 {
            let (sx, sy) = src(x, y);
            data.extend_from_slice(t.pixel(sx, sy));
        }
    }
    Texture { data, ..t.clone() }
}

/// A white, dark-outlined digit on a transparent background.
fn digit(d: usize) -> Texture {
    let glyph = &DIGITS[d - 1];
    let (w, h) = (
        GLYPH_COLS.iter().sum::<usize>(),
        GLYPH_ROWS.iter().sum::<usize>(),
    );
    let (ox, oy) = ((16 - w) / 2, (16 - h) / 2);
    let mut ink = [[false; 16]; 16];
    let mut y = oy;
    for (gy, &rh) in GLYPH_ROWS.iter().enumerate() {
        let mut x = ox;
        for (gx, &cw) in GLYPH_COLS.iter().enumerate() {
            if glyph[gy].as_bytes()[gx] == b'#' {
                for row in ink.iter_mut().skip(y).take(rh) {
                    row[x..x + cw].fill(true);
                }
            }
            x += cw;
        }
        y += rh;
    }
    let mut data = Vec::with_capacity(16 * 16 * 4);
    for y in 0..16usize {
        for x in 0..16usize {
            let near = (y.saturating_sub(1)..=(y + 1).min(15))
                .any(|yy| (x.saturating_sub(1)..=(x + 1).min(15)).any(|xx| ink[yy][xx]));
            let px = if ink[y][x] {
                c(250, 250, 250)
            } else if near {
                c(28, 28, 32)
            } else {
                CLEAR
            };
            data.extend_from_slice(&px);
        }
    }
    Texture {
        width: 16,
        height: 16,
        channels: 4,
        data,
    }
}

/// All builtin textures by name.
pub(super) fn build_all() -> Vec<(&'static str, Texture)> {
    let mut out: Vec<(&'static str, Texture)> = ART.iter().map(|a| (a.name, render(a))).collect();
    let find = |out: &[(&str, Texture)], name: &str| {
        out.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| t.clone())
            .expect("base sprite exists")
    };
    let left = find(&out, "player-left");
    let right = find(&out, "arrow-right");
    out.push(("player-right", remap(&left, |x, y| (15 - x, y))));
    out.push(("arrow-left", remap(&right, |x, y| (15 - x, y))));
    out.push(("arrow-up", remap(&right, |x, y| (15 - y, x))));
    out.push(("arrow-down", remap(&right, |x, y| (y, 15 - x))));
    const DIGIT_NAMES: [&str; 9] = ["1", "2", "3", "4", "5", "6", "7", "8", "9"];
    for (i, name) in DIGIT_NAMES.iter().enumerate() {
        out.push((name, digit(i + 1)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sprite_is_well_formed() {
        let all = build_all();
        for (name, t) in &all {
            assert_eq!(t.data.len(), 16 * 16 * t.channels, "{name}");
        }
        let mut names: Vec<_> = all.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len(), "duplicate sprite names");
    }

    #[test]
    fn derived_sprites_point_the_right_way() {
        let all = build_all();
        let get = |n: &str| all.iter().find(|(k, _)| *k == n).unwrap().1.clone();
        // The arrow-right head (grey 'A') is at x=14; the other directions follow.
        let grey = [110, 114, 124, 255];
        assert_eq!(get("arrow-right").pixel(14, 7), grey);
        assert_eq!(get("arrow-left").pixel(1, 7), grey);
        assert_eq!(get("arrow-up").pixel(7, 1), grey);
        assert_eq!(get("arrow-down").pixel(8, 14), grey);
        // Digits are white ink with a dark outline.
        let one = get("1");
        assert!(one.data.chunks(4).any(|p| p == [250, 250, 250, 255]));
        assert!(one.data.chunks(4).any(|p| p == [28, 28, 32, 255]));
    }
}
