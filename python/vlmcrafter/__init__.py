"""vlm-eval for Python: Crafter, exactly as crafter 1.8.3 plays it, at native speed.

``from vlmcrafter import crafter`` gives a drop-in for ``crafter.Env`` (same constructor, frames,
rewards and info, byte for byte) and ``crafter.VectorEnv``, n envs stepped in native threads
into one preallocated frame array. When gymnasium (>= 1.0) is installed, importing this
package registers the env id ``vlmcrafter/Crafter-v1`` (and crafter's ``CrafterReward-v1`` and
``CrafterNoReward-v1`` under the same namespace): ``gymnasium.make`` gives the single env
(:mod:`vlmcrafter.gym`), ``gymnasium.make_vec(id, num_envs=n)`` the native ``VectorEnv``
(:mod:`vlmcrafter.vector`; ``vectorization_mode="sync"`` gives gymnasium's ``SyncVectorEnv``).
``vlmcrafter.envpool.make("Crafter-v1", num_envs=n, batch_size=b)`` gives EnvPool's asynchronous
``send``/``recv`` API (:mod:`vlmcrafter.envpool`).

The wheel also installs the ``vlm-eval`` command (the native CLI).
"""

from . import _native
from . import crafter
from . import envpool
from . import vector

__version__: str = _native.__version__

__all__ = ["crafter", "envpool", "vector", "__version__", "GYM_IDS"]


#: The gymnasium ids registered when gymnasium imports: ours, and crafter's own two ids (crafter
#: registers them with gym) under our namespace, each with crafter's keyword arguments.
GYM_IDS = {
    "vlmcrafter/Crafter-v1": {},
    "vlmcrafter/CrafterReward-v1": {"reward": True},
    "vlmcrafter/CrafterNoReward-v1": {"reward": False},
}


def _register_gymnasium() -> None:
    try:
        import gymnasium
    except ImportError:
        return
    for env_id, kwargs in GYM_IDS.items():
        if env_id not in gymnasium.registry:
            # max_episode_steps: crafter's own registration (10000, its default length): make()
            # adds gymnasium's TimeLimit, make_vec hands it to make_vec_env (see vector.py).
            gymnasium.register(
                id=env_id,
                entry_point="vlmcrafter.gym:CrafterEnv",
                vector_entry_point="vlmcrafter.vector:make_vec_env",
                max_episode_steps=10000,
                kwargs=dict(kwargs),
            )


_register_gymnasium()
