"""A user's script, type-checked by mypy (scripts/python_pkg_check.sh runs `mypy --strict` over
this file against the installed wheel's stubs): EnvPool's asynchronous loop over
`vlmcrafter.envpool`. Never run by pytest (its name does not start with test_)."""

import numpy as np
import numpy.typing as npt

from vlmcrafter import envpool


def policy(obs: npt.NDArray[np.uint8]) -> npt.NDArray[np.int32]:
    return np.zeros(obs.shape[0], dtype=np.int32)


def main() -> None:
    envs = envpool.make("Crafter-v1", env_type="gymnasium", num_envs=4, batch_size=2, seed=0)
    envs.async_reset()
    total = 0.0
    for _ in range(10):
        obs, rew, term, trunc, info = envs.recv()
        env_id: npt.NDArray[np.int32] = info["env_id"]
        envs.send(policy(obs), env_id)
        total += float(np.sum(rew)) + float(np.sum(term | trunc))
    print(total, envs.in_flight, envs.observation_space, envs.is_async)
    envs.close()
    with envpool.make_gymnasium(num_envs=2) as sync:
        frames, infos = sync.reset()
        frames, rew, term, trunc, infos = sync.step(np.array([0, 1]))
        print(frames.shape, rew.dtype)


if __name__ == "__main__":
    main()
