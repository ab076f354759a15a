/*
 * vulkan_wrap.h — the one shape of the Vulkan family's wrappers, as the
 * forms of its tables' rows (vulkan.def says how a row reads).  Each file
 * includes it right before expanding its own table into wrappers, and
 * forgets the forms after (vulkan_forms_undef.h).
 *
 * Each wrapper finds its device's next function (none: the loader never
 * hands out a wrapper for a function the device lacks, so this is garbage),
 * forwards to it, records only on success (a submission: before it)
 * while the family is installed and the shim active, and leaves the result
 * and errno as the call left them.
 * `object`: the first parameter, the dispatchable object whose device's
 * table the call goes through (a queue's and a command buffer's are their
 * device's).
 */
#define VK_BEGIN(type, fail, object, name, params)                                            \
    static VKAPI_ATTR type VKAPI_CALL wrap_##name params /* NOLINT */                         \
    {                                                                                         \
        const void *caller = __builtin_return_address(0);                                    \
        ds_vk_device *d_ = ds_vk_device_of(object);                                           \
        if (!d_ || !d_->name)                                                                 \
            return fail;                                                                      \
        (void)caller;
#define VK_HOOK_ON(object, name, params, args, after)                                          \
    VK_BEGIN(VkResult, VK_ERROR_INITIALIZATION_FAILED, object, name, params)                  \
        VkResult r_ = d_->name args; /* NOLINT */                                             \
        int errno_ = errno;                                                                   \
        if (r_ == VK_SUCCESS && ds_vk_on()) {                                                 \
            after;                                                                            \
        }                                                                                     \
        errno = errno_;                                                                       \
        return r_;                                                                            \
    }
/* A submission: modelled before it is forwarded, where DLSHIM_SYNC=enforce
 * can still make the host wait for what the queue must not overtake
 * (modelled even should the driver then refuse it: a program goes on from
 * a failed submission rarely, and a tick too many orders nothing wrong). */
#define VK_BEFORE_ON(object, name, params, args, before)                                      \
    VK_BEGIN(VkResult, VK_ERROR_INITIALIZATION_FAILED, object, name, params)                  \
        int errno_ = errno;                                                                   \
        if (ds_vk_on()) {                                                                     \
            before;                                                                           \
        }                                                                                     \
        errno = errno_;                                                                       \
        return d_->name args; /* NOLINT */                                                    \
    }
#define VK_VOID_ON(object, name, params, args, before)                                        \
    VK_BEGIN(void, , object, name, params)                                                    \
        int errno_ = errno;                                                                   \
        if (ds_vk_on()) {                                                                     \
            before;                                                                           \
        }                                                                                     \
        errno = errno_;                                                                       \
        d_->name args; /* NOLINT */                                                           \
    }
/* A free or unmap refused under protect (made twice, or inside another):
 * Vulkan has no error to return, so the call is dropped, which is what
 * protects; a deferred one is made at the last release (vulkan.c's
 * release() and release_mapping()). */
#define VK_FREE(name, params, args, check, done)                                              \
    VK_BEGIN(void, , device, name, params)                                                    \
        int errno_ = errno;                                                                   \
        bool on_ = ds_vk_on();                                                                \
        int action_ = on_ ? (check) : DS_FREE_FORWARD;                                        \
        errno = errno_;                                                                       \
        if (action_ != DS_FREE_FORWARD)                                                       \
            return;                                                                           \
        d_->name args; /* NOLINT */                                                           \
        errno_ = errno;                                                                       \
        if (on_) {                                                                            \
            done;                                                                             \
        }                                                                                     \
        errno = errno_;                                                                       \
    }
#define VK_HOOK(name, params, args, after) VK_HOOK_ON(device, name, params, args, after)
#define VK_VOID(name, params, args, before) VK_VOID_ON(device, name, params, args, before)
